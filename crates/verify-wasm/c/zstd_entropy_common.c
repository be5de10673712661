/* zstd's common/entropy_common.c with its FSE_isError and HUF_isError
 * renamed too: the other files define those names as macros of their own,
 * so c/zstd_prefix.h cannot. */
#define FSE_isError nw_FSE_isError
#define HUF_isError nw_HUF_isError
#include "common/entropy_common.c"
