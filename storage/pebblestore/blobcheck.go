package pebblestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// damagedFileError is returned by the store's file system when Pebble opens
// a data file that cannot be read, instead of the file. Pebble v2.1 panics
// when it finds a blob file damaged on opening it (while reporting the
// corruption); a plain open error makes it fail the read instead, which
// the store reports as storage.ErrCorrupt.
type damagedFileError struct {
	path   string
	reason string
}

func (e *damagedFileError) Error() string {
	return fmt.Sprintf("damaged file %s: %s", e.path, e.reason)
}

// Pebble's blob file footer (sstable/blob): a checksum of the rest of the
// footer, then index handle, checksum type, format, original file number,
// and a magic string.
const (
	blobFooterLen = 38
	blobMagic     = "\xf0\x9f\xaa\xb3\xf0\x9f\xa6\x80"
)

// Open implements vfs.FS. A blob file is checked before Pebble reads it:
// one cut short or with a damaged footer is refused (damagedFileError).
func (fs *faultFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.faults.parkIfAbandoned()
	f, err := fs.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".blob") {
		return f, err
	}
	if reason := checkBlobFooter(f); reason != "" {
		_ = f.Close()
		return nil, &damagedFileError{path: name, reason: reason}
	}
	return f, nil
}

// checkBlobFooter returns why f is not a complete blob file, or "".
func checkBlobFooter(f vfs.File) string {
	st, err := f.Stat()
	if err != nil {
		return "" // let Pebble meet the error itself
	}
	size := st.Size()
	if size < blobFooterLen {
		return fmt.Sprintf("%d bytes long, shorter than a blob file's footer", size)
	}
	var b [blobFooterLen]byte
	if _, err := f.ReadAt(b[:], size-blobFooterLen); err != nil && err != io.EOF {
		return ""
	}
	if string(b[30:]) != blobMagic {
		return fmt.Sprintf("no blob file footer at its end (%d bytes): cut short or overwritten", size)
	}
	if binary.LittleEndian.Uint32(b[:4]) != maskedCRC(b[4:]) {
		return "its footer's checksum does not match"
	}
	return ""
}

// castagnoli is the CRC-32C table Pebble checksums its files with.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is Pebble's checksum of b: CRC-32C, rotated and offset as
// LevelDB does so that a checksum of checksums stays strong.
func maskedCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	return (c>>15 | c<<17) + 0xa282ead8
}
