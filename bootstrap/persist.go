package bootstrap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Persistence is a snapshot file plus a change log beside it
// (SnapshotPath + ".log"). Every change appends the new state of the dp
// ranks it touched to the log and fsyncs it, before the registration is
// answered, so an acknowledged registration survives a crash; concurrent
// registrations share one append (they queue on persistMu and the first one
// writes everybody's changes). The log is folded into the snapshot (temp
// file, fsync, rename, then truncate the log) once it outgrows both
// SnapshotCompactBytes and the snapshot. A change costs one small append
// instead of a rewrite of the whole registry, which cost 18 s per 1,000
// registrations by the 4,000th.
//
// Records hold whole dp-rank states, so replaying the log over a snapshot
// that already contains them is harmless: a crash between the rename and the
// truncation loses nothing. A torn last line (a crash mid-append) is
// ignored; a bad line before the last is an error.

// journal is the open change log; owned by persist under persistMu.
type journal struct {
	f        *os.File
	size     int64 // bytes in the log
	base     int64 // bytes in the snapshot file
	mustFold bool  // an append failed: the next write is a full snapshot
}

// maxDroppedLogged bounds the lines logged for engines of a snapshot dropped
// at load (a file can hold many).
const maxDroppedLogged = 16

func (s *Server) logPath() string { return s.cfg.SnapshotPath + ".log" }

func (s *Server) loadSnapshot() error {
	data, err := os.ReadFile(s.cfg.SnapshotPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("bootstrap: read snapshot: %w", err)
	}
	logData, lerr := os.ReadFile(s.logPath())
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return fmt.Errorf("bootstrap: read snapshot log: %w", lerr)
	}
	if data == nil && len(logData) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if data != nil {
		if err := s.reg.Restore(now, data); err != nil {
			return fmt.Errorf("bootstrap: snapshot %s (remove it to start empty): %w", s.cfg.SnapshotPath, err)
		}
	}
	lines := bytes.Split(logData, []byte{'\n'})
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec snapshotSlot
		err := json.Unmarshal(line, &rec)
		if err == nil {
			err = s.reg.applyChange(now, rec)
		}
		if err != nil {
			if i == len(lines)-1 {
				s.log.Warn("ignoring a torn last record of the snapshot log (a crash mid-write)", "path", s.logPath())
				break
			}
			return fmt.Errorf("bootstrap: snapshot log %s line %d (remove it to start from the snapshot alone): %w", s.logPath(), i+1, err)
		}
	}
	s.journal.base = int64(len(data))
	// Fold what the log held into a fresh snapshot at the first write.
	s.journal.mustFold = len(logData) > 0
	if dropped := s.reg.enforceLimits(); len(dropped) > 0 {
		for i, why := range dropped {
			if i == maxDroppedLogged {
				s.log.Warn("more engines of the snapshot dropped", "count", len(dropped)-i)
				break
			}
			s.log.Warn("dropped an engine of the snapshot beyond the registry limits", "path", s.cfg.SnapshotPath, "why", why)
		}
		s.journal.mustFold = true // the file no longer says what is held
	}
	s.reg.takeChanges()
	s.persisted = s.reg.Revision()
	s.log.Info("loaded registry snapshot; engines stay hidden until probed", "path", s.cfg.SnapshotPath, "log_bytes", len(logData))
	return nil
}

// persist makes the changes since the last call durable. A failure is
// logged: the registration it follows already succeeded in memory, and
// failing it would abort the prefill.
func (s *Server) persist() {
	if s.cfg.SnapshotPath == "" {
		return
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	s.mu.Lock()
	rev := s.reg.Revision()
	j := &s.journal
	if rev == s.persisted && !j.mustFold {
		s.mu.Unlock()
		return
	}
	if j.mustFold || (j.size > s.cfg.SnapshotCompactBytes && j.size > j.base) {
		snap := s.reg.Snapshot(s.now())
		s.mu.Unlock()
		if err := s.fold(snap); err != nil {
			j.mustFold = true
			s.metrics.snapshotWrites.WithLabelValues("error").Inc()
			s.log.Error("cannot write registry snapshot", "path", s.cfg.SnapshotPath, "err", err)
			return
		}
		j.mustFold = false
		s.metrics.snapshotWrites.WithLabelValues("ok").Inc()
		s.persisted = rev
		return
	}
	changes := s.reg.takeChanges()
	s.mu.Unlock()
	var buf bytes.Buffer
	for _, c := range changes {
		b, err := json.Marshal(c)
		if err != nil {
			j.mustFold = true
			s.log.Error("cannot encode a snapshot log record", "err", err)
			return
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := s.appendLog(buf.Bytes()); err != nil {
		// The changes left the dirty set: only a full snapshot has them now.
		j.mustFold = true
		s.metrics.snapshotWrites.WithLabelValues("error").Inc()
		s.log.Error("cannot append to the registry snapshot log", "path", s.logPath(), "err", err)
		return
	}
	s.metrics.snapshotWrites.WithLabelValues("ok").Inc()
	s.persisted = rev
}

func (s *Server) appendLog(b []byte) error {
	j := &s.journal
	if j.f == nil {
		f, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		j.f, j.size = f, st.Size()
	}
	n, err := j.f.Write(b)
	j.size += int64(n)
	s.metrics.snapshotBytes.Add(float64(n))
	if err != nil {
		return err
	}
	return j.f.Sync()
}

// fold writes the whole registry as the snapshot, then empties the log.
func (s *Server) fold(snap Snapshot) error {
	data, err := MarshalSnapshot(snap)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.cfg.SnapshotPath, data); err != nil {
		return err
	}
	s.metrics.snapshotBytes.Add(float64(len(data)))
	j := &s.journal
	j.base = int64(len(data))
	if j.f != nil {
		if err := j.f.Truncate(0); err != nil {
			return err
		}
		j.size = 0
		return j.f.Sync()
	}
	if err := os.Truncate(s.logPath(), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	j.size = 0
	return nil
}

func (s *Server) closeJournal() {
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	if s.journal.f != nil {
		s.journal.f.Close()
		s.journal.f = nil
	}
}

// writeFileAtomic writes path through a temp file, fsync and rename, so a
// crash leaves either the old or the new file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("bootstrap: snapshot: %w", err)
	}
	tmp := f.Name()
	w := bufio.NewWriter(f)
	_, err = w.Write(data)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bootstrap: snapshot: %w", err)
	}
	return nil
}
