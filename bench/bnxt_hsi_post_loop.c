/*
 * The baseline of bench-post's bnxt rows: the post and poll steps of a bnxt RC send queue in
 * static WQE mode written by hand over the kernel's own roce_hsi.h/bnxt_hsi.h structs (Linux
 * 6.12, extracted into the build tree by test/vendor), as qplib_fp.c bnxt_qplib_post_send and
 * qplib_res.h bnxt_qplib_ring_prod_db do them, over plain memory:
 *  - post: per entry a 128-byte WQE (sq_rdma_hdr WRITE_WQE, one sq_sge, the other five slots
 *    zeroed: Rig's entries hold no stale bytes either) and its sq_psn_search_ext after the ring
 *    (bnxt_qplib_fill_psn_search); per batch SIGNAL_COMP on the batch's last WQE, the x86-64 or
 *    aarch64 udma_to_device_barrier, and the dbc_dbc doorbell (SQ, index, epoch, xid, path RoCE,
 *    valid) as one 64-bit store;
 *  - poll: the toggle bit of cq_req `ci` against the phase, udma_from_device_barrier, read
 *    qp_handle, status and sq_cons_idx (bnxt_qplib_cq_process_req), one CQ doorbell at the end.
 */
#include "vendor_shim_bnxt.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#define udma_to_device_barrier() asm volatile("" ::: "memory")
#define udma_from_device_barrier() asm volatile("lfence" ::: "memory")
#elif defined(__aarch64__)
#define udma_to_device_barrier() asm volatile("dmb oshst" ::: "memory")
#define udma_from_device_barrier() asm volatile("dmb oshld" ::: "memory")
#endif

struct static_wqe {
	struct sq_rdma_hdr hdr;
	struct sq_sge sge;
	uint8_t unused[80];
} __attribute__((aligned(128)));

static inline uint64_t db_key(uint32_t type, uint32_t xid, uint32_t index, uint32_t epoch)
{
	const uint32_t lo = (index & DBC_DBC_INDEX_MASK) | (epoch ? DBC_DBC_EPOCH : 0);
	const uint32_t hi = (xid & DBC_DBC_XID_MASK) | DBC_DBC_PATH_ROCE | DBC_DBC_VALID | type;
	return htole64((uint64_t)hi << 32 | lo);
}

/* Posts n RDMA WRITEs of 64 bytes (entries first .. first+n-1) in batches of `batch`, one
 * doorbell each. `log_size`: the ring holds 2^log_size WQEs; psn: the next PSN (updated). */
void bnxt_hsi_post_loop(void *ring, void *psn_area, uint32_t log_size, uint64_t first, uint64_t n,
			uint32_t batch, uint32_t qpn, uint32_t rkey, uint32_t lkey, uint64_t rbase,
			uint64_t lbase, uint32_t *psn, void *doorbell)
{
	struct static_wqe *r = ring;
	struct sq_psn_search_ext *p = psn_area;
	const uint64_t mask = (1ull << log_size) - 1;
	uint64_t i = first;
	const uint64_t end = first + n;
	while (i < end) {
		struct static_wqe *w = 0;
		for (uint32_t b = 0; b < batch && i < end; b++, i++) {
			w = &r[i & mask];
			const uint64_t off = (i & 0xff) << 6;
			memset(w, 0, sizeof(*w));
			w->hdr.wqe_type = SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE;
			w->hdr.wqe_size = 3;
			w->hdr.length = htole32(64);
			w->hdr.remote_va = htole64(rbase + off);
			w->hdr.remote_key = htole32(rkey);
			w->sge.va_or_pa = htole64(lbase + off);
			w->sge.l_key = htole32(lkey);
			w->sge.size = htole32(64);
			struct sq_psn_search_ext *e = &p[i & mask];
			const uint32_t next = (*psn + 1) & 0xffffff;
			e->opcode_start_psn = htole32(*psn | (uint32_t)SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE << 24);
			e->flags_next_psn = htole32(next);
			e->start_slot_idx = htole16((uint16_t)((i & mask) * 8));
			e->reserved16 = 0;
			e->reserved32 = 0;
			*psn = next;
		}
		w->hdr.flags |= SQ_RDMA_HDR_FLAGS_SIGNAL_COMP;
		udma_to_device_barrier();
		*(volatile uint64_t *)doorbell =
			db_key(DBC_DBC_TYPE_SQ, qpn, (uint32_t)(i & mask), (uint32_t)((i >> log_size) & 1));
	}
}

/* Takes n requester CQEs from consumer *ci of a 2^log_size ring; one CQ doorbell at the end. */
uint64_t bnxt_hsi_poll_loop(void *cq_ring, uint32_t log_size, uint32_t *ci, uint64_t n, uint32_t cqn,
			    void *doorbell)
{
	const struct cq_req *r = cq_ring;
	const uint32_t mask = (1u << log_size) - 1;
	uint64_t sum = 0;
	for (uint64_t k = 0; k < n; k++) {
		const struct cq_req *c = &r[*ci & mask];
		const uint8_t phase = ((*ci >> log_size) & 1) == 0;
		if ((c->cqe_type_toggle & CQ_REQ_TOGGLE) != phase)
			break;
		udma_from_device_barrier();
		sum += le64toh(c->qp_handle) + c->status + le16toh(c->sq_cons_idx);
		++*ci;
	}
	udma_to_device_barrier();
	*(volatile uint64_t *)doorbell = db_key(DBC_DBC_TYPE_CQ, cqn, *ci & mask, (*ci >> log_size) & 1);
	return sum;
}
