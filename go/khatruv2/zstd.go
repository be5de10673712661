package khatruv2

/*
#include <stddef.h>

// libzstd's stable API (zstd.h, v1.5), compiled into the binary by
// github.com/DataDog/zstd; declared here, as that package exports no
// context with a prepared dictionary.
typedef struct ZSTD_CCtx_s ZSTD_CCtx;
typedef struct ZSTD_CDict_s ZSTD_CDict;
ZSTD_CCtx* ZSTD_createCCtx(void);
ZSTD_CDict* ZSTD_createCDict(const void* dict, size_t dictSize, int level);
size_t ZSTD_CCtx_setParameter(ZSTD_CCtx* cctx, int param, int value);
size_t ZSTD_CCtx_refCDict(ZSTD_CCtx* cctx, const ZSTD_CDict* cdict);
size_t ZSTD_compress2(ZSTD_CCtx* cctx, void* dst, size_t cap, const void* src, size_t size);
unsigned ZSTD_isError(size_t code);
size_t ZSTD_compressBound(size_t size);
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"

	_ "github.com/DataDog/zstd" // links libzstd
	"github.com/nostrwire/nostrwire/go/nwb"
)

// zstd.h parameter numbers: ZSTD_c_compressionLevel, the frame flags, and
// ZSTD_c_format (ZSTD_c_experimentalParam2) with ZSTD_f_zstd1_magicless.
const (
	zstdCompressionLevel = 100
	zstdContentSizeFlag  = 200
	zstdChecksumFlag     = 201
	zstdDictIDFlag       = 202
	zstdFormat           = 10
	zstdMagicless        = 1
)

// recordCompressor writes compressed records (spec/nwb.md §11) with
// libzstd and prepared dictionaries: a record of a few hundred bytes costs
// microseconds, where an encoder that resets its dictionary tables for
// every frame costs a hundred. The frames are the reference relay's: no
// magic, checksum, dictionary id or content size.
type recordCompressor struct {
	set   *nwb.DictSet
	level int
	dicts map[uint32]*C.ZSTD_CDict
	ctxs  chan *C.ZSTD_CCtx
}

func newRecordCompressor(set *nwb.DictSet) (*recordCompressor, error) {
	rc := &recordCompressor{set: set, level: set.Level, dicts: map[uint32]*C.ZSTD_CDict{},
		ctxs: make(chan *C.ZSTD_CCtx, runtime.GOMAXPROCS(0))}
	for _, d := range set.Dictionaries {
		// libzstd copies the dictionary; the CDicts live as long as the set.
		cd := C.ZSTD_createCDict(unsafe.Pointer(&d.Data[0]), C.size_t(len(d.Data)), C.int(set.Level))
		if cd == nil {
			return nil, errors.New("zstd: a dictionary of the set was refused")
		}
		rc.dicts[d.ID] = cd
	}
	return rc, nil
}

func (rc *recordCompressor) ctx() (*C.ZSTD_CCtx, error) {
	select {
	case c := <-rc.ctxs:
		return c, nil
	default:
	}
	c := C.ZSTD_createCCtx()
	if c == nil {
		return nil, errors.New("zstd: no context")
	}
	for _, p := range [][2]C.int{{zstdFormat, zstdMagicless}, {zstdContentSizeFlag, 0},
		{zstdChecksumFlag, 0}, {zstdDictIDFlag, 0}, {zstdCompressionLevel, C.int(rc.level)}} {
		if C.ZSTD_isError(C.ZSTD_CCtx_setParameter(c, p[0], p[1])) != 0 {
			return nil, errors.New("zstd: parameter refused")
		}
	}
	return c, nil
}

func (rc *recordCompressor) release(c *C.ZSTD_CCtx) {
	select {
	case rc.ctxs <- c:
	default:
		// More contexts than processors were in use at once: keep a
		// bounded pool (a context is a few hundred KB).
		go func() { rc.ctxs <- c }()
	}
}

// appendStored appends the stored form of record: compressed with the
// dictionary of its kind (else the fallback, else none) when that is
// smaller, else the record itself.
func (rc *recordCompressor) appendStored(dst, record []byte) ([]byte, error) {
	kind, err := nwb.PeekKind(record)
	if err != nil {
		return dst, err
	}
	var id uint32
	var cdict *C.ZSTD_CDict
	if d := rc.set.ForKind(kind); d != nil {
		id, cdict = d.ID, rc.dicts[d.ID]
	}
	c, err := rc.ctx()
	if err != nil {
		return dst, err
	}
	defer rc.release(c)
	if C.ZSTD_isError(C.ZSTD_CCtx_refCDict(c, cdict)) != 0 {
		return dst, errors.New("zstd: dictionary refused")
	}
	start := len(dst)
	dst = append(dst, nwb.FormCompressed)
	dst = nwb.AppendUvarint(dst, uint64(id))
	dst = nwb.AppendUvarint(dst, uint64(len(record)))
	header := len(dst)
	bound := int(C.ZSTD_compressBound(C.size_t(len(record))))
	dst = append(dst, make([]byte, bound)...)
	n := C.ZSTD_compress2(c, unsafe.Pointer(&dst[header]), C.size_t(bound),
		unsafe.Pointer(&record[0]), C.size_t(len(record)))
	if C.ZSTD_isError(n) != 0 || header-start+int(n) >= len(record) {
		return append(dst[:start], record...), nil
	}
	return dst[:header+int(n)], nil
}
