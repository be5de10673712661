/* The few declarations libsecp256k1 asks of <stdlib.h> on a target without
 * a C library (wasm32-unknown-unknown). The verifier never allocates: it
 * uses the static context, so malloc and free stay unreferenced. */
#ifndef NOSTRWIRE_WASM_STDLIB_H
#define NOSTRWIRE_WASM_STDLIB_H
#include <stddef.h>
void *malloc(size_t size);
void free(void *ptr);
#define abort() __builtin_trap()
#endif
