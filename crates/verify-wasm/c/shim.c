/* libsecp256k1 as one translation unit, plus what the Rust side needs of it:
 * BIP-340 verification against a cached parsed x-only key. Only the static
 * context is used (verification needs no other), so nothing here allocates. */
#include "secp256k1.c"

/* Bad arguments are a bug of the caller, never of the input: trap. */
void rustsecp256k1_v0_10_0_default_illegal_callback_fn(const char *str, void *data) {
    (void)str;
    (void)data;
    __builtin_trap();
}
void rustsecp256k1_v0_10_0_default_error_callback_fn(const char *str, void *data) {
    (void)str;
    (void)data;
    __builtin_trap();
}

/* 1 and the parsed key in `out64` when `in32` is a valid x-only key. */
int nw_xonly_parse(unsigned char *out64, const unsigned char *in32) {
    return rustsecp256k1_v0_10_0_xonly_pubkey_parse(rustsecp256k1_v0_10_0_context_static,
        (rustsecp256k1_v0_10_0_xonly_pubkey *)out64, in32);
}

/* 1 when `sig64` is a valid BIP-340 signature of the 32-byte `msg32`. */
int nw_schnorr_verify(const unsigned char *sig64, const unsigned char *msg32, const unsigned char *xonly64) {
    return rustsecp256k1_v0_10_0_schnorrsig_verify(rustsecp256k1_v0_10_0_context_static, sig64, msg32, 32,
        (const rustsecp256k1_v0_10_0_xonly_pubkey *)xonly64);
}
