/*
 * The baseline of bench-post: rdma-core's post and poll steps written by hand over its own
 * mlx5dv.h helpers, as providers/mlx5 does them, over plain memory:
 *  - post: per entry mlx5dv_set_ctrl_seg + raddr + mlx5dv_set_data_seg (as mlx5dv_loop.c);
 *    per batch udma_to_device_barrier, db[MLX5_SND_DBR] = htobe32(cur_post & 0xffff),
 *    mmio_wc_start, the ctrl segment's first 8 bytes as one 64-bit store to the BlueFlame
 *    register, mmio_flush_writes, bf offset ^= buf_size (qp.c _mlx5_post_send / post_send_db);
 *  - poll: owner bit and opcode of CQE ci (cq.c get_sw_cqe), udma_from_device_barrier, read
 *    opcode, qpn, wqe_counter, byte_cnt, then dbrec[MLX5_CQ_SET_CI] = htobe32(++ci & 0xffffff).
 * The barriers are util/udma_barrier.h's x86-64 and aarch64 definitions (not installed by
 * libibverbs-dev, so spelled out here).
 */
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#define udma_to_device_barrier() asm volatile("" ::: "memory")
#define udma_from_device_barrier() asm volatile("lfence" ::: "memory")
#define mmio_flush_writes() asm volatile("sfence" ::: "memory")
#elif defined(__aarch64__)
#define udma_to_device_barrier() asm volatile("dmb oshst" ::: "memory")
#define udma_from_device_barrier() asm volatile("dmb oshld" ::: "memory")
#define mmio_flush_writes() asm volatile("dsb st" ::: "memory")
#endif
#define mmio_wc_start() mmio_flush_writes()

struct post_block {
	struct mlx5_wqe_ctrl_seg ctrl;
	struct mlx5_wqe_raddr_seg raddr;
	struct mlx5_wqe_data_seg data;
	uint8_t pad[16];
} __attribute__((aligned(64)));

/* Posts n RDMA WRITEs (entries first .. first+n-1) in batches of `batch`, one doorbell each. */
void mlx5dv_post_loop(void *ring, uint32_t ring_mask, uint64_t first, uint64_t n, uint32_t batch,
		      uint32_t qpn, uint32_t rkey, uint32_t lkey, uint64_t rbase, uint64_t lbase,
		      void *dbrec, void *bf_reg, uint32_t *bf_offset, uint32_t bf_half)
{
	struct post_block *r = ring;
	uint64_t i = first;
	const uint64_t end = first + n;
	while (i < end) {
		struct post_block *w = 0;
		for (uint32_t b = 0; b < batch && i < end; b++, i++) {
			w = &r[i & ring_mask];
			const uint64_t off = (i & 0xff) << 6;
			const uint8_t fm = (i & 63) == 63 ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
			mlx5dv_set_ctrl_seg(&w->ctrl, (uint16_t)i, MLX5_OPCODE_RDMA_WRITE, 0, qpn, fm, 3,
					    0, 0);
			w->raddr.raddr = htobe64(rbase + off);
			w->raddr.rkey = htobe32(rkey);
			w->raddr.reserved = 0;
			mlx5dv_set_data_seg(&w->data, 64, lkey, (uintptr_t)(lbase + off));
		}
		udma_to_device_barrier();
		((volatile uint32_t *)dbrec)[MLX5_SND_DBR] = htobe32((uint32_t)(i & 0xffff));
		mmio_wc_start();
		uint64_t first8;
		memcpy(&first8, &w->ctrl, 8);
		*(volatile uint64_t *)((char *)bf_reg + *bf_offset) = first8;
		mmio_flush_writes();
		*bf_offset ^= bf_half;
	}
}

/* Polls n CQEs starting at consumer index *ci; returns a sum of what it read (kept live). */
uint64_t mlx5dv_poll_loop(void *cq_ring, uint32_t log_size, uint32_t *ci, uint64_t n, void *dbrec)
{
	uint64_t sum = 0;
	const uint32_t mask = (1u << log_size) - 1;
	for (uint64_t k = 0; k < n; k++) {
		struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)((char *)cq_ring + ((*ci & mask) << 6));
		const uint8_t op_own = c->op_own;
		if (mlx5dv_get_cqe_opcode(c) == MLX5_CQE_INVALID ||
		    (mlx5dv_get_cqe_owner(c) ^ !!(*ci & (1u << log_size))))
			break;
		udma_from_device_barrier();
		sum += (op_own >> 4) + (be32toh(c->sop_drop_qpn) & 0xffffff) + be16toh(c->wqe_counter) +
		       be32toh(c->byte_cnt);
		++*ci;
		((volatile uint32_t *)dbrec)[0 /* MLX5_CQ_SET_CI */] = htobe32(*ci & 0xffffff);
	}
	return sum;
}
