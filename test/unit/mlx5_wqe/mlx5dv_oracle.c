/*
 * mlx5dv_oracle: builds mlx5 work entries, receive entries and completions with rdma-core's own
 * definitions in <infiniband/mlx5dv.h> (Debian libibverbs-dev): mlx5dv_set_ctrl_seg,
 * mlx5dv_set_data_seg, struct mlx5_wqe_raddr_seg / mlx5_wqe_inl_data_seg / mlx5_cqe64 /
 * mlx5_err_cqe, MLX5_OPCODE_*, MLX5_INLINE_SEG, MLX5_INVALID_LKEY. The helpers need no device
 * and no library (they are static inline in mlx5dv.h). Reads one request per line on
 * stdin, writes the bytes in hex, one line each. It is the oracle the abi tests compare with.
 *
 *   E W qp index signal raddr rkey laddr len lkey     RDMA WRITE
 *   E R qp index signal raddr rkey laddr len lkey     RDMA READ (remote -> local)
 *   E S qp index signal laddr len lkey                SEND
 *   E I qp index signal raddr rkey HEX|-              RDMA WRITE, inline payload
 *   E X qp index signal raddr rkey laddr len lkey imm RDMA WRITE with immediate
 *   E Y qp index signal laddr len lkey imm            SEND with immediate
 *                                                     (imm: the host value; the ctrl segment takes
 *                                                     it big-endian, as ibv_send_wr.imm_data)
 *   G W|R qp index signal raddr rkey n {laddr len lkey}*n   RDMA WRITE/READ, gather list
 *   G S qp index signal n {laddr len lkey}*n          SEND, gather list (one data segment each)
 *   V stride n {laddr len lkey}*n                     receive entry of `stride` bytes
 *   C opcode qpn sopcode wqe_counter byte_cnt imm syndrome vendor owner se format
 *                                                     completion; also prints the dv getters
 *
 * The zero-length rule mirrors rdma-core's post paths (providers/mlx5/qp.c): an element of
 * length 0 gets no data segment.
 */
#include <endian.h>
#include <infiniband/mlx5dv.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

static void set_raddr(struct mlx5_wqe_raddr_seg *r, uint64_t raddr, uint32_t rkey)
{
	/* rdma-core has no helper for this segment; its post path fills it field by field */
	r->raddr = htobe64(raddr);
	r->rkey = htobe32(rkey);
	r->reserved = 0;
}

static int unhex(const char *s, uint8_t *out, size_t max)
{
	if (strcmp(s, "-") == 0)
		return 0;
	size_t n = strlen(s) / 2;
	if (n > max)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	return (int)n;
}

static void entry(char kind, uint32_t qp, uint64_t index, int signal)
{
	uint8_t w[64] __attribute__((aligned(64)));
	memset(w, 0, sizeof w);
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)w;
	uint8_t fm_ce_se = signal ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	uint64_t raddr, laddr;
	uint32_t rkey, len, lkey, imm = 0;
	uint8_t ds = 1;

	if (kind == 'W' || kind == 'R' || kind == 'X') {
		if (scanf("%" SCNu64 " %" SCNu32 " %" SCNu64 " %" SCNu32 " %" SCNu32, &raddr, &rkey,
			  &laddr, &len, &lkey) != 5)
			exit(2);
		if (kind == 'X' && scanf("%" SCNu32, &imm) != 1)
			exit(2);
		set_raddr((void *)(w + 16), raddr, rkey);
		ds = 2;
		if (len) {
			mlx5dv_set_data_seg((void *)(w + 32), len, lkey, (uintptr_t)laddr);
			ds = 3;
		}
		mlx5dv_set_ctrl_seg(ctrl, (uint16_t)index,
				    kind == 'W' ? MLX5_OPCODE_RDMA_WRITE :
				    kind == 'X' ? MLX5_OPCODE_RDMA_WRITE_IMM : MLX5_OPCODE_RDMA_READ, 0, qp,
				    fm_ce_se, ds, 0, htobe32(imm));
	} else if (kind == 'S' || kind == 'Y') {
		if (scanf("%" SCNu64 " %" SCNu32 " %" SCNu32, &laddr, &len, &lkey) != 3)
			exit(2);
		if (kind == 'Y' && scanf("%" SCNu32, &imm) != 1)
			exit(2);
		if (len) {
			mlx5dv_set_data_seg((void *)(w + 16), len, lkey, (uintptr_t)laddr);
			ds = 2;
		}
		mlx5dv_set_ctrl_seg(ctrl, (uint16_t)index, kind == 'S' ? MLX5_OPCODE_SEND : MLX5_OPCODE_SEND_IMM,
				    0, qp, fm_ce_se, ds, 0, htobe32(imm));
	} else if (kind == 'I') {
		char data[128];
		uint8_t payload[64];
		if (scanf("%" SCNu64 " %" SCNu32 " %127s", &raddr, &rkey, data) != 3)
			exit(2);
		int n = unhex(data, payload, 28);
		if (n < 0)
			exit(3);
		set_raddr((void *)(w + 16), raddr, rkey);
		struct mlx5_wqe_inl_data_seg *seg = (void *)(w + 32);
		seg->byte_count = htobe32((uint32_t)n | MLX5_INLINE_SEG);
		memcpy(w + 32 + sizeof *seg, payload, (size_t)n);
		ds = (uint8_t)(2 + (n + sizeof *seg + 15) / 16);
		mlx5dv_set_ctrl_seg(ctrl, (uint16_t)index, MLX5_OPCODE_RDMA_WRITE, 0, qp, fm_ce_se, ds,
				    0, 0);
	} else {
		exit(4);
	}
	hex(w, sizeof w);
}

/* An entry with a list of n elements, as rdma-core's _mlx5_post_send fills it from a wr's sg_list:
 * one mlx5dv_set_data_seg per element of non-zero length, ds counting the segments written. */
static void gather_entry(char kind, uint32_t qp, uint64_t index, int signal)
{
	uint8_t w[64] __attribute__((aligned(64)));
	memset(w, 0, sizeof w);
	uint8_t fm_ce_se = signal ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
	size_t at = 16;
	uint8_t opcode;
	if (kind == 'W' || kind == 'R') {
		uint64_t raddr;
		uint32_t rkey;
		if (scanf("%" SCNu64 " %" SCNu32, &raddr, &rkey) != 2)
			exit(2);
		set_raddr((void *)(w + 16), raddr, rkey);
		at = 32;
		opcode = kind == 'W' ? MLX5_OPCODE_RDMA_WRITE : MLX5_OPCODE_RDMA_READ;
	} else if (kind == 'S') {
		opcode = MLX5_OPCODE_SEND;
	} else {
		exit(4);
	}
	unsigned n;
	if (scanf("%u", &n) != 1)
		exit(2);
	for (unsigned i = 0; i < n; i++) {
		uint64_t laddr;
		uint32_t len, lkey;
		if (scanf("%" SCNu64 " %" SCNu32 " %" SCNu32, &laddr, &len, &lkey) != 3)
			exit(2);
		if (!len)
			continue;
		if (at + sizeof(struct mlx5_wqe_data_seg) > sizeof w)
			exit(3);
		mlx5dv_set_data_seg((void *)(w + at), len, lkey, (uintptr_t)laddr);
		at += sizeof(struct mlx5_wqe_data_seg);
	}
	mlx5dv_set_ctrl_seg((void *)w, (uint16_t)index, opcode, 0, qp, fm_ce_se, (uint8_t)(at / 16), 0,
			    0);
	hex(w, sizeof w);
}

static void receive(void)
{
	unsigned stride, n;
	if (scanf("%u %u", &stride, &n) != 2 || stride > 1024)
		exit(2);
	uint8_t w[1024];
	memset(w, 0, stride);
	struct mlx5_wqe_data_seg *scat = (void *)w;
	unsigned j = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t laddr;
		uint32_t len, lkey;
		if (scanf("%" SCNu64 " %" SCNu32 " %" SCNu32, &laddr, &len, &lkey) != 3)
			exit(2);
		if (!len)
			continue;
		mlx5dv_set_data_seg(&scat[j++], len, lkey, (uintptr_t)laddr);
	}
	if (j < stride / sizeof *scat) {
		scat[j].byte_count = 0;
		scat[j].lkey = htobe32(MLX5_INVALID_LKEY);
		scat[j].addr = 0;
	}
	hex(w, stride);
}

static void completion(void)
{
	unsigned opcode, sopcode, wqe_counter, syndrome, vendor, owner, se, format;
	uint32_t qpn, byte_cnt, imm;
	if (scanf("%u %" SCNu32 " %u %u %" SCNu32 " %" SCNu32 " %u %u %u %u %u", &opcode, &qpn,
		  &sopcode, &wqe_counter, &byte_cnt, &imm, &syndrome, &vendor, &owner, &se,
		  &format) != 11)
		exit(2);
	struct mlx5_cqe64 cqe;
	memset(&cqe, 0, sizeof cqe);
	cqe.imm_inval_pkey = htobe32(imm);
	if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR) {
		struct mlx5_err_cqe *err = (void *)&cqe;
		err->syndrome = (uint8_t)syndrome;
		err->vendor_err_synd = (uint8_t)vendor;
		err->s_wqe_opcode_qpn = htobe32(sopcode << 24 | (qpn & 0xffffff));
		err->wqe_counter = htobe16((uint16_t)wqe_counter);
	} else {
		cqe.byte_cnt = htobe32(byte_cnt);
		cqe.sop_drop_qpn = htobe32(sopcode << 24 | (qpn & 0xffffff));
		cqe.wqe_counter = htobe16((uint16_t)wqe_counter);
	}
	cqe.op_own = (uint8_t)(opcode << 4 | (format & 3) << 2 | (se ? 2 : 0));
	mlx5dv_set_cqe_owner(&cqe, (uint8_t)owner);
	printf("%u %u %u %u ", mlx5dv_get_cqe_opcode(&cqe), mlx5dv_get_cqe_owner(&cqe),
	       mlx5dv_get_cqe_se(&cqe), mlx5dv_get_cqe_format(&cqe));
	hex(&cqe, sizeof cqe);
}

int main(void)
{
	char tag[4];
	while (scanf("%3s", tag) == 1) {
		if (tag[0] == 'E' || tag[0] == 'G') {
			char kind[4];
			uint32_t qp;
			uint64_t index;
			int signal;
			if (scanf("%3s %" SCNu32 " %" SCNu64 " %d", kind, &qp, &index, &signal) != 4)
				return 2;
			if (tag[0] == 'G')
				gather_entry(kind[0], qp, index, signal);
			else
				entry(kind[0], qp, index, signal);
		} else if (tag[0] == 'V') {
			receive();
		} else if (tag[0] == 'C') {
			completion();
		} else {
			return 5;
		}
	}
	return 0;
}
