/* The few kernel definitions drivers/net/ethernet/broadcom/bnxt/bnxt_hsi.h and
 * drivers/infiniband/hw/bnxt_re/roce_hsi.h need outside the kernel, then the headers themselves
 * (extracted from Debian's linux-source-6.12 into the build tree by test/vendor). Only types and
 * macros are shimmed here; no layout is. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint16_t __le16;
typedef uint32_t __le32;
typedef uint64_t __le64;
typedef uint16_t __be16;
typedef uint32_t __be32;
typedef uint64_t __be64;
#define __packed __attribute__((packed))
#include "roce_hsi.h" /* includes bnxt_hsi.h */
