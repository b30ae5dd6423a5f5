// Package cluster runs several switchyard frontends over one engine fleet,
// coordinated through etcd, in vLLM's multi-API-server shape:
//
//   - every frontend owns a stable client index (its place in every
//     engine's INIT lists, and the client_index it stamps on its ADDs),
//     assigned once per frontend name by an etcd transaction and kept across
//     restarts ([Join], [Table]);
//   - every frontend is a member under an etcd lease, so the others see it
//     leave within the lease TTL ([Member.Members]);
//   - one member is elected (etcd's concurrency election) to own the
//     engine handshake and the DP coordinator ([Launcher]); the others, and
//     the leader itself, follow the coordinator's publish ([Follower]); when
//     the leader is lost another member is elected and binds the same
//     handshake and coordinator addresses, so engines and followers
//     reconnect to it unchanged.
//
// The pure parts (the client table, INIT's address lists) are plain types
// tested without sockets; etcd is used only through [Member].
package cluster
