package wire

// Hello is an engine's first message on the handshake socket:
// {"status": "HELLO", "local": bool, "headless": bool}; Ready is the same map with
// status "READY" plus optional keys.
type HandshakeStatus struct {
	Status              string // "HELLO" or "READY"
	Local               bool
	Headless            bool
	ParallelConfigHash  OptString
	CoordStorePort      OptInt
	NumRedundantExperts OptInt
	NumGPUBlocks        OptInt    // older engines put it here
	DPStatsAddress      OptString // older engines put it here
	// Keys lists every key the map carried, in order (decode only): which keys READY
	// has, not only their values, tells vLLM releases apart (see Layout).
	Keys []string
}

// EngineZmqAddresses is INIT's addresses map.
type EngineZmqAddresses struct {
	Inputs                      []string
	Outputs                     []string
	CoordinatorInput            OptString
	CoordinatorOutput           OptString
	FrontendStatsPublishAddress OptString
}

// HandshakeInit is EngineHandshakeMetadata, the INIT map the frontend sends after
// HELLO. ParallelConfig is written as a map (empty when nil).
type HandshakeInit struct {
	Addresses      EngineZmqAddresses
	ParallelConfig []RawField
}

// ReadyResponse is EngineCoreReadyResponse, the registration frame an engine sends on
// each input socket. Every field is optional on decode; Empty is set for the empty
// frame older engines send. Unknown keys are kept in Unknown.
type ReadyResponse struct {
	Empty                      bool
	MaxModelLen                OptInt
	NumGPUBlocks               OptInt
	BlockSize                  OptInt
	MambaBlockSize             OptInt
	DPStatsAddress             OptString
	DType                      OptString
	VLLMVersion                OptString
	WorldSize                  OptInt
	DataParallelSize           OptInt
	KVCacheSizeTokens          OptInt
	KVCacheMaxConcurrency      Raw // float or int
	TensorParallelSize         OptInt
	PipelineParallelSize       OptInt
	DecodeContextParallelSize  OptInt
	DataParallelRank           OptInt
	MaxNumSeqs                 OptInt
	MaxNumBatchedTokens        OptInt
	InstanceID                 OptString
	SupportsLoRA               OptBool
	MaxLoRAs                   OptInt
	CoordStorePort             OptInt
	CoordinatorInputAddress    OptString
	CoordinatorOutputAddress   OptString
	KVEventsConfig             Raw
	WeightTransferBackend      OptString
	EnableSleepMode            OptBool
	SupportsDraftWeightUpdates OptBool
	Unknown                    []RawField
	// Keys lists every key the map carried, in order (decode only; nil for Empty):
	// the registration's shape is part of what places an engine's layout.
	Keys []string
}
