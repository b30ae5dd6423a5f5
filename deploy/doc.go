// Package deploy holds no code: its tests check the deployment files (the
// repository's Dockerfile, deploy/systemd, deploy/kubernetes) as far as a machine
// without a container runtime or a cluster allows.
package deploy
