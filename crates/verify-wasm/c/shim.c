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

/* ---- Batch verification (BIP-340, "Batch Verification") ----
 *
 * With a_1 = 1 and, for i > 1, a_i a 126-bit number drawn from a hash of the
 * whole batch, every signature of the batch is valid exactly when
 *
 *     (Σ a_i·s_i)·G − Σ a_i·R_i − Σ (a_i·e_i)·P_i = O,
 *
 * except with probability at most 2^-126 for a batch holding an invalid one
 * (R_i = lift_x(r_i) with even y, e_i the BIP-340 challenge). One Strauss
 * multi-multiplication shares its ~129 doublings among all 2n points, and
 * a 126-bit a_i splits (GLV) into one half and a zero, so each R_i costs
 * half the additions of its P_i. A key that repeats in the batch is one
 * point with the sum of its scalars. A batch that fails says nothing about
 * which signature is bad: the caller then checks them one by one. */

#define NW(name) rustsecp256k1_v0_10_0_##name

/* Signatures per call; the Rust side groups at most this many. */
#define NW_BATCH_MAX 64
#define NW_BATCH_POINTS (2 * NW_BATCH_MAX)
#define NW_TABLE ECMULT_TABLE_SIZE(WINDOW_A)
/* One item: a parsed key (64 bytes, as nw_xonly_parse writes it), its 32
 * x-only bytes, the 32-byte message and the 64-byte signature. */
#define NW_ITEM 192

/* Strauss state for NW_BATCH_POINTS points (about 280 KB): static, since
 * nothing here allocates and the stack is small. One per thread for the
 * host's tests; an instance of the module has one thread. */
#ifdef __wasm__
#define NW_PER_THREAD
#else
#define NW_PER_THREAD _Thread_local
#endif
static NW_PER_THREAD NW(fe) nw_aux[NW_BATCH_POINTS * NW_TABLE];
static NW_PER_THREAD NW(ge) nw_pre_a[NW_BATCH_POINTS * NW_TABLE];
static NW_PER_THREAD struct NW(strauss_point_state) nw_ps[NW_BATCH_POINTS];
static NW_PER_THREAD NW(gej) nw_points[NW_BATCH_POINTS];
static NW_PER_THREAD NW(scalar) nw_scalars[NW_BATCH_POINTS];

/* 1 when each of the `n` items holds a valid signature (with the
 * probability above), 0 when one is invalid or `n` is over
 * NW_BATCH_MAX. */
int nw_schnorr_verify_batch(const unsigned char *items, size_t n) {
    NW(scalar) e[NW_BATCH_MAX];
    NW(scalar) g_scalar;
    NW(sha256) seed_hash;
    unsigned char seed[32];
    unsigned char key_of_point[NW_BATCH_MAX];
    size_t i, keys = 0;
    struct NW(strauss_state) state;
    NW(gej) sum;

    if (n > NW_BATCH_MAX) {
        return 0;
    }
    if (n == 0) {
        return 1;
    }

    /* The randomizers' seed commits to every (e_i, s_i), and e_i commits to
     * R_i, P_i and the message: nothing in the batch can be chosen after
     * the randomizers are known. */
    NW(sha256_initialize)(&seed_hash);
    NW(sha256_write)(&seed_hash, (const unsigned char *)"nostrwire/bip340-batch", 22);
    for (i = 0; i < n; i++) {
        const unsigned char *item = items + i * NW_ITEM;
        const unsigned char *x = item + 64, *msg = item + 96, *sig = item + 128;
        NW(fe) rx;
        NW(ge) r;
        int overflow;
        unsigned char e32[32];

        if (!NW(fe_set_b32_limit)(&rx, sig)) {
            return 0;
        }
        NW(scalar_set_b32)(&nw_scalars[i], sig + 32, &overflow);
        if (overflow) {
            return 0;
        }
        if (!NW(ge_set_xo_var)(&r, &rx, 0)) {
            return 0;
        }
        NW(ge_neg)(&r, &r);
        NW(gej_set_ge)(&nw_points[i], &r);
        NW(schnorrsig_challenge)(&e[i], sig, msg, 32, x);
        NW(scalar_get_b32)(e32, &e[i]);
        NW(sha256_write)(&seed_hash, e32, 32);
        NW(sha256_write)(&seed_hash, sig + 32, 32);
    }
    NW(sha256_finalize)(&seed_hash, seed);

    /* Points 0..n-1: −R_i with a_i (their slots held s_i until now).
     * Points n..n+keys-1: −P with Σ a_i·e_i over the items P signed. */
    for (i = 0; i < n; i++) {
        const unsigned char *item = items + i * NW_ITEM;
        NW(scalar) a, s = nw_scalars[i], ae;
        size_t k;

        if (i == 0) {
            NW(scalar_set_int)(&a, 1);
        } else {
            unsigned char block[36], a32[32];
            NW(sha256) h;
            memcpy(block, seed, 32);
            block[32] = (unsigned char)i;
            block[33] = (unsigned char)(i >> 8);
            block[34] = block[35] = 0;
            NW(sha256_initialize)(&h);
            NW(sha256_write)(&h, block, 36);
            NW(sha256_finalize)(&h, a32);
            memset(a32, 0, 16);
            a32[16] &= 0x3f;
            NW(scalar_set_b32)(&a, a32, NULL);
            if (NW(scalar_is_zero)(&a)) {
                NW(scalar_set_int)(&a, 1);
            }
        }
        NW(scalar_mul)(&s, &s, &a);
        if (i == 0) {
            g_scalar = s;
        } else {
            NW(scalar_add)(&g_scalar, &g_scalar, &s);
        }
        nw_scalars[i] = a;

        NW(scalar_mul)(&ae, &a, &e[i]);
        for (k = 0; k < keys; k++) {
            if (memcmp(items + key_of_point[k] * NW_ITEM + 64, item + 64, 32) == 0) {
                break;
            }
        }
        if (k == keys) {
            NW(ge) p;
            if (!NW(xonly_pubkey_load)(NW(context_static), &p, (const NW(xonly_pubkey) *)item)) {
                return 0;
            }
            NW(ge_neg)(&p, &p);
            NW(gej_set_ge)(&nw_points[n + k], &p);
            nw_scalars[n + k] = ae;
            key_of_point[k] = (unsigned char)i;
            keys++;
        } else {
            NW(scalar_add)(&nw_scalars[n + k], &nw_scalars[n + k], &ae);
        }
    }

    state.aux = nw_aux;
    state.pre_a = nw_pre_a;
    state.ps = nw_ps;
    NW(ecmult_strauss_wnaf)(&state, &sum, n + keys, nw_points, nw_scalars, &g_scalar);
    return NW(gej_is_infinity)(&sum);
}
