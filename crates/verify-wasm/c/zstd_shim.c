/* The zstd decompressor (vendor/zstd/, v1.5.7, decompression only) as src/zstd.rs
 * uses it: a static DCtx and static DDicts in memory the caller owns, never
 * zstd's allocator; frames in the magicless format (spec/nwb.md §11).
 * Every zstd symbol is renamed by c/zstd_prefix.h (forced in by build.rs),
 * so the host's tests can link the `zstd` crate's own copy beside this one;
 * the functions here are `nwz_…` (the module's exports are `nw_…`). */
#define ZSTD_STATIC_LINKING_ONLY
#include "zstd.h"
#include "zstd_errors.h"
#include "common/error_private.h"

size_t nwz_dctx_bytes(void) { return ZSTD_estimateDCtxSize(); }

size_t nwz_ddict_bytes(size_t dict_len) {
    return ZSTD_estimateDDictSize(dict_len, ZSTD_dlm_byCopy);
}

/* A DCtx for magicless frames in the `size` bytes at `mem` (8-aligned), or
 * NULL. */
void *nwz_init_dctx(void *mem, size_t size) {
    ZSTD_DCtx *dctx = ZSTD_initStaticDCtx(mem, size);
    if (dctx == NULL) return NULL;
    if (ERR_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_format, ZSTD_f_zstd1_magicless)))
        return NULL;
    return dctx;
}

/* A DDict holding a copy of the `len` dictionary bytes at `dict` (a zstd
 * dictionary, or raw content without its magic) in the `size` bytes at
 * `mem` (8-aligned), or NULL if zstd refuses the dictionary. */
const void *nwz_init_ddict(void *mem, size_t size, const void *dict, size_t len) {
    return ZSTD_initStaticDDict(mem, size, dict, len, ZSTD_dlm_byCopy, ZSTD_dct_auto);
}

/* Decompresses the frame into `dst`: the size written, or minus zstd's
 * error code (ZSTD_ErrorCode, never 0). `ddict` may be NULL (no
 * dictionary). */
long long nwz_decompress(void *dctx, const void *ddict, void *dst, size_t cap,
                             const void *src, size_t len) {
    size_t r = ZSTD_decompress_usingDDict((ZSTD_DCtx *)dctx, dst, cap, src, len,
                                          (const ZSTD_DDict *)ddict);
    if (ERR_isError(r)) return -(long long)ZSTD_getErrorCode(r);
    return (long long)r;
}

/* The one function of zstd's zstd_common.c the decompressor calls (that file
 * is not vendored: its ZSTD_isError escapes the renaming). */
ZSTD_ErrorCode ZSTD_getErrorCode(size_t code) { return ERR_getErrorCode(code); }

/* zstd's allocator (ZSTD_DEPS_MALLOC in zstd_prefix.h): reachable only from
 * the ZSTD_create* functions, which nothing here calls. It never allocates. */
void *nw_zstd_malloc(size_t size) { (void)size; return NULL; }
void *nw_zstd_calloc(size_t count, size_t size) { (void)count; (void)size; return NULL; }
void nw_zstd_free(void *ptr) { (void)ptr; }
