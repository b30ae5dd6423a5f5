package kvindex

import "time"

// Limits that follow from the layout: a residency record keeps list links in 24 bits
// and the rank in the 16 bits left over (see rec), and a block size in a uint16.
const (
	maxRecords    = 1<<24 - 2
	maxRanksLimit = 1 << 16
	maxBlockLimit = 1<<16 - 1
)

// Config sets the bounds of an Index. Zero fields take the DefaultConfig values.
type Config struct {
	// MaxBlocks caps the (block, rank) entries of the whole index. Past it, the rank
	// holding the most loses its oldest blocks. The two hash tables are sized for it
	// up front (about 16 bytes per entry) so that no insert ever rehashes under the
	// caller's lock. MaxBlocks + MaxPending is at most 16,777,214.
	MaxBlocks int
	// MaxRanks: ranks accepted are 0 to MaxRanks-1. At most 65,536.
	MaxRanks int
	// MaxPending caps the pending marks (prefix blocks on their way to a rank); past
	// it, the oldest mark is dropped.
	MaxPending int
	// PendingTTL bounds how long a pending mark counts when no BlockStored releases it
	// (the request failed, the event was lost).
	PendingTTL time.Duration
	// DefaultBlockSize keys the pending marks of a rank that has sent no event yet.
	// vLLM's default block_size is 16.
	DefaultBlockSize int
	// MaxBlockSize is the largest block_size accepted; larger events are refused.
	MaxBlockSize int
	// MaxBlockSizes bounds the distinct block sizes indexed at once; a lookup keys the
	// prompt once per size, so a flood of odd sizes cannot make lookups slow.
	MaxBlockSizes int
	// Seed keys the content hash. The edge passes a random value so that clients
	// cannot aim colliding prompts at the index; 0 takes a fixed default.
	Seed uint64
}

// DefaultConfig returns the defaults: a million entries (about 60 MB), 1,024 ranks,
// 65,536 pending marks that live 10 s, block sizes 16 and up to 4,096 tokens, four
// sizes at once.
func DefaultConfig() Config {
	return Config{
		MaxBlocks:        1 << 20,
		MaxRanks:         1024,
		MaxPending:       1 << 16,
		PendingTTL:       10 * time.Second,
		DefaultBlockSize: 16,
		MaxBlockSize:     4096,
		MaxBlockSizes:    4,
		Seed:             0x5eed_c0de_1dea_cafe,
	}
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxBlocks == 0 {
		c.MaxBlocks = d.MaxBlocks
	}
	if c.MaxRanks == 0 {
		c.MaxRanks = d.MaxRanks
	}
	if c.MaxPending == 0 {
		c.MaxPending = d.MaxPending
	}
	if c.PendingTTL == 0 {
		c.PendingTTL = d.PendingTTL
	}
	if c.DefaultBlockSize == 0 {
		c.DefaultBlockSize = d.DefaultBlockSize
	}
	if c.MaxBlockSize == 0 {
		c.MaxBlockSize = d.MaxBlockSize
	}
	if c.MaxBlockSizes == 0 {
		c.MaxBlockSizes = d.MaxBlockSizes
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	return c
}

// Validate reports the first field out of range, as a *ConfigError.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxBlocks < 1 || c.MaxBlocks > maxRecords:
		return &ConfigError{"MaxBlocks", "must be 1 to 16,777,214"}
	case c.MaxRanks < 1 || c.MaxRanks > maxRanksLimit:
		return &ConfigError{"MaxRanks", "must be 1 to 65,536"}
	case c.MaxPending < 1 || c.MaxBlocks+c.MaxPending > maxRecords:
		// Slots, which blocks and marks both hold, are numbered in 24 bits.
		return &ConfigError{"MaxPending", "must be at least 1, and MaxBlocks + MaxPending at most 16,777,214"}
	case c.PendingTTL < 0:
		return &ConfigError{"PendingTTL", "must not be negative"}
	case c.MaxBlockSize < 1 || c.MaxBlockSize > maxBlockLimit:
		return &ConfigError{"MaxBlockSize", "must be 1 to 65,535"}
	case c.DefaultBlockSize < 1 || c.DefaultBlockSize > c.MaxBlockSize:
		return &ConfigError{"DefaultBlockSize", "must be 1 to MaxBlockSize"}
	case c.MaxBlockSizes < 1 || c.MaxBlockSizes > 64:
		return &ConfigError{"MaxBlockSizes", "must be 1 to 64"}
	}
	return nil
}
