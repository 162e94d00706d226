/* The few kernel definitions include/linux/mlx5/mlx5_ifc.h needs outside the kernel, then the
 * header itself, and rdma-core's <infiniband/mlx5dv.h> for DEVX_SET/DEVX_GET: the golden bytes
 * of every firmware layout are built by the vendors' own accessors over the kernel's own
 * layouts. Only types and macros are shimmed here; no layout is. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define DECLARE_FLEX_ARRAY(T, name) \
	struct {                    \
		struct {            \
		} __empty_##name;   \
		T name[];           \
	}
#include <infiniband/mlx5dv.h>
#include "mlx5_ifc.h"
