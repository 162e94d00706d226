/*
 * The baseline of bench-abi: a hand-rolled loop over rdma-core's own mlx5dv.h inline helpers
 * (mlx5dv_set_ctrl_seg, mlx5dv_set_data_seg, the raddr segment filled by hand as rdma-core's
 * post path does), encoding 64-byte RDMA WRITE entries into a 4096-entry ring.
 * (~2.4 ns/entry here).
 */
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <stdint.h>
#include <string.h>

struct rdma_write_block {
	struct mlx5_wqe_ctrl_seg ctrl;
	struct mlx5_wqe_raddr_seg raddr;
	struct mlx5_wqe_data_seg data;
	uint8_t pad[16];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct rdma_write_block) == 64, "one basic block");

void mlx5dv_write_loop(void *ring, uint32_t ring_mask, uint64_t n, uint32_t qpn, uint32_t rkey,
		       uint32_t lkey, uint64_t rbase, uint64_t lbase)
{
	struct rdma_write_block *r = ring;
	for (uint64_t i = 0; i < n; i++) {
		struct rdma_write_block *w = &r[i & ring_mask];
		const uint64_t off = (i & 0xff) << 6;
		const uint8_t fm = (i & 63) == 63 ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
		mlx5dv_set_ctrl_seg(&w->ctrl, (uint16_t)i, MLX5_OPCODE_RDMA_WRITE, 0, qpn, fm, 3, 0, 0);
		w->raddr.raddr = htobe64(rbase + off);
		w->raddr.rkey = htobe32(rkey);
		w->raddr.reserved = 0;
		mlx5dv_set_data_seg(&w->data, 64, lkey, (uintptr_t)(lbase + off));
		/* udma_to_device_barrier() on x86: keeps the stores from being merged across entries */
		__asm__ volatile("" ::: "memory");
	}
}
