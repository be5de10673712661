/* <stdio.h> for wasm32-unknown-unknown: libsecp256k1 prints only from its
 * default callbacks, which this build replaces (USE_EXTERNAL_DEFAULT_CALLBACKS). */
#ifndef NOSTRWIRE_WASM_STDIO_H
#define NOSTRWIRE_WASM_STDIO_H
typedef struct nostrwire_file FILE;
#define stderr ((FILE *)0)
#define fprintf(...) ((void)0)
#endif
