/* <string.h> for wasm32-unknown-unknown: the Rust side's compiler_builtins
 * provides these four. */
#ifndef NOSTRWIRE_WASM_STRING_H
#define NOSTRWIRE_WASM_STRING_H
#include <stddef.h>
void *memset(void *s, int c, size_t n);
void *memcpy(void *dest, const void *src, size_t n);
void *memmove(void *dest, const void *src, size_t n);
int memcmp(const void *s1, const void *s2, size_t n);
#endif
