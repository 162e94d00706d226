/*
 * bnxt_oracle: the golden bytes of every abi/bnxt format, built over the kernel's own structs
 * and defines (bnxt_hsi.h, roce_hsi.h of Linux 6.12, extracted at build time; see
 * vendor_shim_bnxt.h). abi/bnxt is compared with this output by the bnxt unit tests.
 *
 * With no argument it dumps, for every structure abi/bnxt declares:
 *   S struct size                       sizeof the kernel struct
 *   F struct field value bytes          the struct with only `field` = value (twice: the field's
 *                                       largest value, then a pattern); bytes = the whole struct
 *   A struct field fieldbytes bytes     the same for a byte-string field
 *   U struct bytes                      every field at its pattern at once
 *   D struct bytes                      the struct as the kernel driver prepares it (opcode,
 *                                       cmd_size, cmpl_ring, target_id …)
 *   C NAME value                        the kernel's value of a constant (constants.def)
 * A field is named by the kernel member and, for a sub-field, by the kernel's own NAME_MASK /
 * NAME_SFT (or single-bit define); the name printed is abi/bnxt's (the define without the struct
 * prefix).
 *
 * With argument "entries" it reads one request per line on stdin and prints the bytes of each:
 *   SEND mode signal n {va len key}*n           sq_send_hdr + n sq_sge
 *   SENDI mode signal HEX|-                     sq_send_hdr + inline bytes
 *   WRITE mode signal raddr rkey n {...}        sq_rdma_hdr (WRITE_WQE) + n sq_sge
 *   WRITEI mode signal raddr rkey HEX|-         sq_rdma_hdr (WRITE_WQE) + inline bytes
 *   READ mode signal raddr rkey n {...}         sq_rdma_hdr (READ_WQE) + n sq_sge
 *   RECV mode wr_id n {...}                     rq_wqe_hdr + n sq_sge
 *   DB type xid index epoch toggle              a RoCE dbc_dbc doorbell
 *   GID gidHEX macHEX                           cmdq_add_gid as qplib_sp.c fills gid/src_mac
 * mode 0 = static (128-byte entries), 1 = variable (2 + payload slots); wqe_size counts the
 * slots used (bnxt_re qplib_fp.c bnxt_qplib_post_send, bnxt_qplib_post_recv).
 */
#include "vendor_shim_bnxt.h"

#include <endian.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static uint64_t get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_le(uint8_t *p, size_t n, uint64_t v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static unsigned ctz(uint64_t v)
{
	return (unsigned)__builtin_ctzll(v);
}

/* a value with distinct bytes that fits `max` */
static uint64_t pattern(uint64_t max)
{
	uint64_t v = 0x9e3779b97f4a7c15ULL & max;
	return v ? v : 1;
}

static void set_field(uint8_t *word, size_t width, uint64_t mask, unsigned sft, uint64_t v)
{
	uint64_t w = get_le(word, width);
	w = (w & ~mask) | ((v << sft) & mask);
	put_le(word, width, w);
}

static void scalar(const char *s, const char *f, uint8_t *full, size_t size, size_t off,
		   size_t width, uint64_t mask, unsigned sft)
{
	uint8_t buf[512];
	if (mask == 0)
		mask = width == 8 ? ~0ULL : ((1ULL << (8 * width)) - 1);
	uint64_t max = mask >> sft;
	for (int k = 0; k < 2; k++) {
		uint64_t v = k == 0 ? max : pattern(max);
		memset(buf, 0, size);
		set_field(buf + off, width, mask, sft, v);
		printf("F %s %s %" PRIx64 " ", s, f, v);
		hex(buf, size);
		printf("\n");
	}
	set_field(full + off, width, mask, sft, pattern(max));
}

static void bytes(const char *s, const char *f, uint8_t *full, size_t size, size_t off, size_t n)
{
	uint8_t buf[512];
	memset(buf, 0, size);
	for (size_t i = 0; i < n; i++)
		buf[off + i] = full[off + i] = (uint8_t)(0x11 + 0x25 * i);
	printf("A %s %s ", s, f);
	hex(buf + off, n);
	printf(" ");
	hex(buf, size);
	printf("\n");
}

#define BEGIN(st)                                          \
	{                                                  \
		struct st full_;                           \
		const char *sn_ = #st;                     \
		memset(&full_, 0, sizeof full_);           \
		printf("S %s %zu\n", sn_, sizeof full_);
#define END()                                              \
		printf("U %s ", sn_);                      \
		hex(&full_, sizeof full_);                 \
		printf("\n");                              \
	}
#define OFF(m) ((size_t)((uint8_t *)&full_.m - (uint8_t *)&full_))
#define FW(m) scalar(sn_, #m, (uint8_t *)&full_, sizeof full_, OFF(m), sizeof full_.m, 0, 0)
#define FM(m, ours, P)                                                                    \
	scalar(sn_, #ours, (uint8_t *)&full_, sizeof full_, OFF(m), sizeof full_.m, P##_MASK, \
	       P##_SFT)
#define FB(m, ours, BIT)                                                                  \
	scalar(sn_, #ours, (uint8_t *)&full_, sizeof full_, OFF(m), sizeof full_.m, BIT,      \
	       ctz(BIT))
#define FA(m) bytes(sn_, #m, (uint8_t *)&full_, sizeof full_, OFF(m), sizeof full_.m)
/* the struct as the kernel driver prepares it: `prep` fills `d_` */
#define DFLT(prep)                                         \
	{                                                  \
		__typeof__(full_) d_;                      \
		memset(&d_, 0, sizeof d_);                 \
		prep;                                      \
		printf("D %s ", sn_);                      \
		hex(&d_, sizeof d_);                       \
		printf("\n");                              \
	}
/* hwrm_req_init(): req_type, cmpl_ring = target_id = -1 */
#define HWRM_PREP(op) d_.req_type = htole16(op); d_.cmpl_ring = htole16(0xffff); \
	d_.target_id = htole16(0xffff)
/* bnxt_qplib_rcfw_cmd_prep() + bnxt_qplib_set_cmd_slots(): cmd_size in 16-byte slots */
#define CMDQ_PREP(op) d_.opcode = op; d_.cmd_size = (sizeof d_ + 15) / 16

#define HWRM_REQ() FW(req_type); FW(cmpl_ring); FW(seq_id); FW(target_id); FW(resp_addr)
#define HWRM_RESP() FW(error_code); FW(req_type); FW(seq_id); FW(resp_len)
#define CMDQ_HDR() FW(opcode); FW(cmd_size); FW(flags); FW(cookie); FW(resp_size); FW(resp_addr)
#define CREQ(P) FM(type, type, P##_TYPE); FW(status); FW(cookie); FB(v, v, P##_V); FW(event)
#define SB_HDR() FW(opcode); FW(status); FW(cookie); FW(flags); FW(resp_size)

static void dump_hwrm(void)
{
	BEGIN(hwrm_cmd_hdr) FW(req_type); FW(cmpl_ring); FW(seq_id); FW(target_id); FW(resp_addr); END()
	BEGIN(hwrm_resp_hdr) HWRM_RESP(); END()
	BEGIN(hwrm_short_input)
	FW(req_type); FW(signature); FW(target_id); FW(size); FW(req_addr);
	DFLT(d_.signature = htole16(SHORT_REQ_SIGNATURE_SHORT_CMD))
	END()
	BEGIN(hwrm_err_output)
	HWRM_RESP(); FW(opaque_0); FW(opaque_1); FW(cmd_err); FW(valid);
	END()
	BEGIN(hwrm_ver_get_input)
	HWRM_REQ(); FW(hwrm_intf_maj); FW(hwrm_intf_min); FW(hwrm_intf_upd);
	DFLT(HWRM_PREP(HWRM_VER_GET); d_.hwrm_intf_maj = HWRM_VERSION_MAJOR;
	     d_.hwrm_intf_min = HWRM_VERSION_MINOR; d_.hwrm_intf_upd = HWRM_VERSION_UPDATE)
	END()
	BEGIN(hwrm_ver_get_output)
	HWRM_RESP();
	FW(hwrm_intf_maj_8b); FW(hwrm_intf_min_8b); FW(hwrm_intf_upd_8b);
	FW(hwrm_fw_maj_8b); FW(hwrm_fw_min_8b); FW(hwrm_fw_bld_8b);
	FW(dev_caps_cfg); FW(roce_fw_maj_8b); FW(roce_fw_min_8b); FW(roce_fw_bld_8b);
	FA(hwrm_fw_name); FA(roce_fw_name);
	FW(chip_num); FW(chip_rev); FW(chip_metal); FW(chip_bond_id); FW(chip_platform_type);
	FW(max_req_win_len); FW(max_resp_len); FW(def_req_timeout); FW(flags); FW(always_1);
	FW(hwrm_intf_major); FW(hwrm_intf_minor); FW(hwrm_intf_build); FW(hwrm_intf_patch);
	FW(roce_fw_major); FW(roce_fw_minor); FW(roce_fw_build); FW(roce_fw_patch);
	FW(max_ext_req_len); FW(max_req_timeout); FW(valid);
	END()
	BEGIN(hwrm_func_reset_input)
	HWRM_REQ(); FW(enables); FW(vf_id); FW(func_reset_level);
	DFLT(HWRM_PREP(HWRM_FUNC_RESET))
	END()
	BEGIN(hwrm_func_reset_output) HWRM_RESP(); FW(valid); END()
	BEGIN(hwrm_func_drv_rgtr_input)
	HWRM_REQ(); FW(flags); FW(enables); FW(os_type); FW(ver_maj_8b); FW(ver_min_8b);
	FW(ver_upd_8b); FW(timestamp); FA(vf_req_fwd); FA(async_event_fwd);
	FW(ver_maj); FW(ver_min); FW(ver_upd); FW(ver_patch);
	DFLT(HWRM_PREP(HWRM_FUNC_DRV_RGTR))
	END()
	BEGIN(hwrm_func_drv_rgtr_output) HWRM_RESP(); FW(flags); FW(valid); END()
	BEGIN(hwrm_func_drv_unrgtr_input)
	HWRM_REQ(); FW(flags);
	DFLT(HWRM_PREP(HWRM_FUNC_DRV_UNRGTR))
	END()
	BEGIN(hwrm_func_qcaps_input)
	HWRM_REQ(); FW(fid);
	DFLT(HWRM_PREP(HWRM_FUNC_QCAPS); d_.fid = htole16(0xffff))
	END()
	BEGIN(hwrm_func_qcaps_output)
	HWRM_RESP(); FW(fid); FW(port_id); FW(flags); FA(mac_address); FW(max_rsscos_ctx);
	FW(max_cmpl_rings); FW(max_tx_rings); FW(max_rx_rings); FW(max_l2_ctxs); FW(max_vnics);
	FW(first_vf_id); FW(max_vfs); FW(max_stat_ctx); FW(max_hw_ring_grps); FW(max_sp_tx_rings);
	FW(max_msix_vfs); FW(flags_ext); FW(flags_ext2); FW(roce_vf_max_av); FW(roce_vf_max_cq);
	FW(roce_vf_max_mrw); FW(roce_vf_max_qp); FW(roce_vf_max_srq); FW(roce_vf_max_gid);
	FW(flags_ext3); FW(max_roce_vfs); FW(valid);
	END()
	BEGIN(hwrm_func_qcfg_input)
	HWRM_REQ(); FW(fid);
	DFLT(HWRM_PREP(HWRM_FUNC_QCFG); d_.fid = htole16(0xffff))
	END()
	BEGIN(hwrm_func_qcfg_output)
	HWRM_RESP(); FW(fid); FW(port_id); FW(vlan); FW(flags); FA(mac_address); FW(pci_id);
	FW(alloc_rsscos_ctx); FW(alloc_cmpl_rings); FW(alloc_tx_rings); FW(alloc_rx_rings);
	FW(alloc_l2_ctx); FW(alloc_vnics); FW(admin_mtu); FW(mru); FW(stat_ctx_id);
	FW(dflt_vnic_id); FW(max_mtu_configured); FW(alloc_stat_ctx); FW(alloc_msix);
	FW(l2_doorbell_bar_size_kb); FW(legacy_l2_db_size_kb); FW(db_page_size); FW(roce_vnic_id);
	FW(host_mtu); FW(roce_max_av_per_vf); FW(roce_max_cq_per_vf); FW(roce_max_mrw_per_vf);
	FW(roce_max_qp_per_vf); FW(roce_max_srq_per_vf); FW(roce_max_gid_per_vf); FW(valid);
	END()
	BEGIN(hwrm_func_cfg_input)
	HWRM_REQ(); FW(fid); FW(num_msix); FW(flags); FW(enables); FW(admin_mtu); FW(mru);
	FW(num_rsscos_ctxs); FW(num_cmpl_rings); FW(num_tx_rings); FW(num_rx_rings);
	FW(num_l2_ctxs); FW(num_vnics); FW(num_stat_ctxs); FW(num_hw_ring_grps);
	FA(dflt_mac_addr); FW(dflt_vlan); FW(async_event_cr); FW(options); FW(host_mtu); FW(flags2);
	FW(enables2); FW(roce_max_av_per_vf); FW(roce_max_cq_per_vf); FW(roce_max_mrw_per_vf);
	FW(roce_max_qp_per_vf); FW(roce_max_srq_per_vf); FW(roce_max_gid_per_vf);
	DFLT(HWRM_PREP(HWRM_FUNC_CFG); d_.fid = htole16(0xffff))
	END()
}

#define BS(t, T)                                                                  \
	FM(t##_pg_size_##t##_lvl, t##_lvl, FUNC_BACKING_STORE_CFG_REQ_##T##_LVL);      \
	FM(t##_pg_size_##t##_lvl, t##_pg_size, FUNC_BACKING_STORE_CFG_REQ_##T##_PG_SIZE); \
	FW(t##_page_dir); FW(t##_num_entries)

static void dump_backing_store(void)
{
	BEGIN(hwrm_func_backing_store_qcaps_input)
	HWRM_REQ();
	DFLT(HWRM_PREP(HWRM_FUNC_BACKING_STORE_QCAPS))
	END()
	BEGIN(hwrm_func_backing_store_qcaps_output)
	HWRM_RESP(); FW(qp_max_entries); FW(qp_min_qp1_entries); FW(qp_max_l2_entries);
	FW(qp_entry_size); FW(srq_max_l2_entries); FW(srq_max_entries); FW(srq_entry_size);
	FW(cq_max_l2_entries); FW(cq_max_entries); FW(cq_entry_size); FW(vnic_max_vnic_entries);
	FW(vnic_max_ring_table_entries); FW(vnic_entry_size); FW(stat_max_entries);
	FW(stat_entry_size); FW(tqm_entry_size); FW(tqm_min_entries_per_ring);
	FW(tqm_max_entries_per_ring); FW(mrav_max_entries); FW(mrav_entry_size);
	FW(tim_entry_size); FW(tim_max_entries); FW(mrav_num_entries_units);
	FW(tqm_entries_multiple); FW(ctx_kind_initializer); FW(ctx_init_mask); FW(qp_init_offset);
	FW(srq_init_offset); FW(cq_init_offset); FW(vnic_init_offset); FW(tqm_fp_rings_count);
	FW(stat_init_offset); FW(mrav_init_offset); FW(tqm_fp_rings_count_ext);
	FW(fast_qpmd_qp_num_entries); FW(valid);
	END()
	BEGIN(hwrm_func_backing_store_cfg_input)
	HWRM_REQ(); FW(flags); FW(enables);
	FM(qpc_pg_size_qpc_lvl, qpc_lvl, FUNC_BACKING_STORE_CFG_REQ_QPC_LVL);
	FM(qpc_pg_size_qpc_lvl, qpc_pg_size, FUNC_BACKING_STORE_CFG_REQ_QPC_PG_SIZE);
	FW(qpc_page_dir); FW(qp_num_entries);
	BS(srq, SRQ); BS(cq, CQ);
	FM(vnic_pg_size_vnic_lvl, vnic_lvl, FUNC_BACKING_STORE_CFG_REQ_VNIC_LVL);
	FM(vnic_pg_size_vnic_lvl, vnic_pg_size, FUNC_BACKING_STORE_CFG_REQ_VNIC_PG_SIZE);
	FW(vnic_page_dir);
	BS(stat, STAT); BS(tqm_sp, TQM_SP); BS(tqm_ring0, TQM_RING0); BS(tqm_ring1, TQM_RING1);
	BS(tqm_ring2, TQM_RING2); BS(tqm_ring3, TQM_RING3); BS(tqm_ring4, TQM_RING4);
	BS(tqm_ring5, TQM_RING5); BS(tqm_ring6, TQM_RING6); BS(tqm_ring7, TQM_RING7);
	BS(mrav, MRAV); BS(tim, TIM);
	FW(qp_num_qp1_entries); FW(qp_num_l2_entries); FW(qp_entry_size); FW(srq_num_l2_entries);
	FW(srq_entry_size); FW(cq_num_l2_entries); FW(cq_entry_size); FW(vnic_num_vnic_entries);
	FW(vnic_num_ring_table_entries); FW(vnic_entry_size); FW(stat_entry_size);
	FW(tqm_entry_size); FW(mrav_entry_size); FW(tim_entry_size);
	FM(tqm_ring8_pg_size_tqm_ring_lvl, ring8_tqm_ring_lvl,
	   FUNC_BACKING_STORE_CFG_REQ_RING8_TQM_RING_LVL);
	FM(tqm_ring8_pg_size_tqm_ring_lvl, ring8_tqm_ring_pg_size,
	   FUNC_BACKING_STORE_CFG_REQ_RING8_TQM_RING_PG_SIZE);
	FW(tqm_ring8_num_entries); FW(tqm_ring8_page_dir); FW(qp_num_fast_qpmd_entries);
	DFLT(HWRM_PREP(HWRM_FUNC_BACKING_STORE_CFG))
	END()
	BEGIN(hwrm_func_backing_store_qcaps_v2_input)
	HWRM_REQ(); FW(type);
	DFLT(HWRM_PREP(HWRM_FUNC_BACKING_STORE_QCAPS_V2))
	END()
	BEGIN(hwrm_func_backing_store_qcaps_v2_output)
	HWRM_RESP(); FW(type); FW(entry_size); FW(flags); FW(instance_bit_map);
	FW(ctx_init_value); FW(ctx_init_offset); FW(entry_multiple); FW(max_num_entries);
	FW(min_num_entries); FW(next_valid_type); FW(subtype_valid_cnt); FW(exact_cnt_bit_map);
	FW(split_entry_0); FW(split_entry_1); FW(split_entry_2); FW(split_entry_3);
	FW(max_instance_count); FW(valid);
	END()
	BEGIN(hwrm_func_backing_store_cfg_v2_input)
	HWRM_REQ(); FW(type); FW(instance); FW(flags); FW(page_dir); FW(num_entries);
	FW(entry_size);
	FM(page_size_pbl_level, pbl_level, FUNC_BACKING_STORE_CFG_V2_REQ_PBL_LEVEL);
	FM(page_size_pbl_level, page_size, FUNC_BACKING_STORE_CFG_V2_REQ_PAGE_SIZE);
	FW(subtype_valid_cnt); FW(split_entry_0); FW(split_entry_1); FW(split_entry_2);
	FW(split_entry_3); FW(enables); FW(next_bs_offset);
	DFLT(HWRM_PREP(HWRM_FUNC_BACKING_STORE_CFG_V2))
	END()
}

static void dump_rings(void)
{
	BEGIN(hwrm_ring_alloc_input)
	HWRM_REQ(); FW(enables); FW(ring_type); FW(cmpl_coal_cnt); FW(flags); FW(page_tbl_addr);
	FW(fbo); FW(page_size); FW(page_tbl_depth); FW(schq_id); FW(length); FW(logical_id);
	FW(cmpl_ring_id); FW(queue_id); FW(rx_buf_size); FW(rx_ring_id); FW(nq_ring_id);
	FW(stat_ctx_id); FW(int_mode); FW(cq_handle);
	DFLT(HWRM_PREP(HWRM_RING_ALLOC))
	END()
	BEGIN(hwrm_ring_alloc_output)
	HWRM_RESP(); FW(ring_id); FW(logical_ring_id); FW(push_buffer_index); FW(valid);
	END()
	BEGIN(hwrm_ring_free_input)
	HWRM_REQ(); FW(ring_type); FW(flags); FW(ring_id); FW(prod_idx); FW(opaque);
	DFLT(HWRM_PREP(HWRM_RING_FREE))
	END()
	BEGIN(hwrm_stat_ctx_alloc_input)
	HWRM_REQ(); FW(stats_dma_addr); FW(update_period_ms); FW(stat_ctx_flags);
	FW(stats_dma_length); FW(flags); FW(steering_tag); FW(stat_ctx_id); FW(alloc_seq_id);
	DFLT(HWRM_PREP(HWRM_STAT_CTX_ALLOC))
	END()
	BEGIN(hwrm_stat_ctx_alloc_output) HWRM_RESP(); FW(stat_ctx_id); FW(valid); END()
	BEGIN(hwrm_stat_ctx_free_input)
	HWRM_REQ(); FW(stat_ctx_id);
	DFLT(HWRM_PREP(HWRM_STAT_CTX_FREE))
	END()
	BEGIN(hwrm_vnic_alloc_input)
	HWRM_REQ(); FW(flags); FW(virtio_net_fid);
	DFLT(HWRM_PREP(HWRM_VNIC_ALLOC))
	END()
	BEGIN(hwrm_vnic_alloc_output) HWRM_RESP(); FW(vnic_id); FW(valid); END()
	BEGIN(hwrm_vnic_cfg_input)
	HWRM_REQ(); FW(flags); FW(enables); FW(vnic_id); FW(dflt_ring_grp); FW(rss_rule);
	FW(cos_rule); FW(lb_rule); FW(mru); FW(default_rx_ring_id); FW(default_cmpl_ring_id);
	FW(queue_id);
	DFLT(HWRM_PREP(HWRM_VNIC_CFG))
	END()
	BEGIN(hwrm_cfa_l2_filter_alloc_input)
	HWRM_REQ(); FW(flags); FW(enables); FA(l2_addr); FW(num_vlans); FA(l2_addr_mask);
	FW(l2_ovlan); FW(l2_ovlan_mask); FW(l2_ivlan); FW(l2_ivlan_mask); FW(src_type);
	FW(src_id); FW(dst_id); FW(mirror_vnic_id); FW(pri_hint); FW(l2_filter_id_hint);
	DFLT(HWRM_PREP(HWRM_CFA_L2_FILTER_ALLOC))
	END()
	BEGIN(hwrm_cfa_l2_filter_alloc_output)
	HWRM_RESP(); FW(l2_filter_id);
	FM(flow_id, flow_id_value, CFA_L2_FILTER_ALLOC_RESP_FLOW_ID_VALUE); FW(valid);
	END()
}

#define INIT_TBL(t, T)                                                    \
	FM(t##_pg_size_##t##_lvl, t##_lvl, CMDQ_INITIALIZE_FW_##T##_LVL);     \
	FM(t##_pg_size_##t##_lvl, t##_pg_size, CMDQ_INITIALIZE_FW_##T##_PG_SIZE); \
	FW(t##_page_dir)

static void dump_rcfw(void)
{
	BEGIN(tlv)
	FW(cmd_discr); FW(reserved_8b); FW(flags); FW(tlv_type); FW(length);
	END()
	BEGIN(cmdq_init)
	FW(cmdq_pbl); FM(cmdq_size_cmdq_lvl, cmdq_lvl, CMDQ_INIT_CMDQ_LVL);
	FM(cmdq_size_cmdq_lvl, cmdq_size, CMDQ_INIT_CMDQ_SIZE); FW(creq_ring_id); FW(prod_idx);
	END()
	BEGIN(cmdq_base) CMDQ_HDR(); END()
	BEGIN(creq_base) FM(type, type, CREQ_BASE_TYPE); FB(v, v, CREQ_BASE_V); FW(event); END()
	BEGIN(creq_qp_event) CREQ(CREQ_QP_EVENT); END()
	BEGIN(creq_qp_error_notification)
	FM(type, type, CREQ_QP_ERROR_NOTIFICATION_TYPE); FW(status);
	FB(v, v, CREQ_QP_ERROR_NOTIFICATION_V); FW(event); FW(req_slow_path_state);
	FW(req_err_state_reason);
	FW(xid); FW(res_slow_path_state); FW(res_err_state_reason); FW(sq_cons_idx);
	FW(rq_cons_idx);
	END()
	BEGIN(creq_cq_error_notification)
	FM(type, type, CREQ_CQ_ERROR_NOTIFICATION_TYPE); FW(status);
	FB(v, v, CREQ_CQ_ERROR_NOTIFICATION_V); FW(event); FW(cq_err_reason); FW(xid);
	END()
	BEGIN(creq_func_event)
	FM(type, type, CREQ_FUNC_EVENT_TYPE); FB(v, v, CREQ_FUNC_EVENT_V); FW(event);
	END()

	BEGIN(cmdq_query_version)
	CMDQ_HDR(); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_QUERY_VERSION))
	END()
	BEGIN(creq_query_version_resp)
	CREQ(CREQ_QUERY_VERSION_RESP); FW(fw_maj); FW(fw_minor); FW(fw_bld); FW(fw_rsvd);
	FW(intf_maj); FW(intf_minor); FW(intf_bld); FW(intf_rsvd);
	END()
	BEGIN(cmdq_initialize_fw)
	CMDQ_HDR(); INIT_TBL(qpc, QPC); INIT_TBL(mrw, MRW); INIT_TBL(srq, SRQ); INIT_TBL(cq, CQ);
	INIT_TBL(tqm, TQM); INIT_TBL(tim, TIM);
	FM(log2_dbr_pg_size, log2_dbr_pg_size, CMDQ_INITIALIZE_FW_LOG2_DBR_PG_SIZE);
	FW(number_of_qp); FW(number_of_mrw); FW(number_of_srq); FW(number_of_cq);
	FW(max_qp_per_vf); FW(max_mrw_per_vf); FW(max_srq_per_vf); FW(max_cq_per_vf);
	FW(max_gid_per_vf); FW(stat_ctx_id);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_INITIALIZE_FW))
	END()
	BEGIN(creq_initialize_fw_resp) CREQ(CREQ_INITIALIZE_FW_RESP); END()
	BEGIN(cmdq_deinitialize_fw)
	CMDQ_HDR(); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DEINITIALIZE_FW))
	END()
	BEGIN(creq_deinitialize_fw_resp) CREQ(CREQ_DEINITIALIZE_FW_RESP); END()
	BEGIN(cmdq_query_func)
	CMDQ_HDR();
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_QUERY_FUNC);
	     d_.resp_size = sizeof(struct creq_query_func_resp_sb) / 16)
	END()
	BEGIN(creq_query_func_resp) CREQ(CREQ_QUERY_FUNC_RESP); FW(size); END()
	BEGIN(creq_query_func_resp_sb)
	SB_HDR(); FW(max_mr_size); FW(max_qp); FW(max_qp_wr); FW(dev_cap_flags); FW(max_cq);
	FW(max_cqe); FW(max_pd); FW(max_sge); FW(max_srq_sge); FW(max_qp_rd_atom);
	FW(max_qp_init_rd_atom); FW(max_mr); FW(max_mw); FW(max_raw_eth_qp); FW(max_ah);
	FW(max_fmr); FW(max_srq_wr); FW(max_pkeys); FW(max_inline_data); FW(max_map_per_fmr);
	FW(l2_db_space_size); FW(max_srq); FW(max_gid); FA(tqm_alloc_reqs); FW(max_dpi);
	FW(max_sge_var_wqe); FW(dev_cap_ext_flags); FW(max_inline_data_var_wqe); FW(start_qid);
	FW(max_msn_table_size);
	FM(dev_cap_ext_flags_2, req_retransmission_support,
	   CREQ_QUERY_FUNC_RESP_SB_REQ_RETRANSMISSION_SUPPORT);
	FW(max_xp_qp_size); FW(create_qp_batch_size); FW(destroy_qp_batch_size);
	END()
	BEGIN(cmdq_set_func_resources)
	CMDQ_HDR(); FW(number_of_qp); FW(number_of_mrw); FW(number_of_srq); FW(number_of_cq);
	FW(max_qp_per_vf); FW(max_mrw_per_vf); FW(max_srq_per_vf); FW(max_cq_per_vf);
	FW(max_gid_per_vf); FW(stat_ctx_id);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_SET_FUNC_RESOURCES))
	END()

	BEGIN(cmdq_create_qp)
	CMDQ_HDR(); FW(qp_handle); FW(qp_flags); FW(type);
	FM(sq_pg_size_sq_lvl, sq_lvl, CMDQ_CREATE_QP_SQ_LVL);
	FM(sq_pg_size_sq_lvl, sq_pg_size, CMDQ_CREATE_QP_SQ_PG_SIZE);
	FM(rq_pg_size_rq_lvl, rq_lvl, CMDQ_CREATE_QP_RQ_LVL);
	FM(rq_pg_size_rq_lvl, rq_pg_size, CMDQ_CREATE_QP_RQ_PG_SIZE);
	FW(dpi); FW(sq_size); FW(rq_size);
	FM(sq_fwo_sq_sge, sq_sge, CMDQ_CREATE_QP_SQ_SGE); FM(sq_fwo_sq_sge, sq_fwo, CMDQ_CREATE_QP_SQ_FWO);
	FM(rq_fwo_rq_sge, rq_sge, CMDQ_CREATE_QP_RQ_SGE); FM(rq_fwo_rq_sge, rq_fwo, CMDQ_CREATE_QP_RQ_FWO);
	FW(scq_cid); FW(rcq_cid); FW(srq_cid); FW(pd_id); FW(sq_pbl); FW(rq_pbl); FW(irrq_addr);
	FW(orrq_addr); FW(request_xid); FW(steering_tag);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_CREATE_QP))
	END()
	BEGIN(creq_create_qp_resp)
	CREQ(CREQ_CREATE_QP_RESP); FW(xid); FW(optimized_transmit_enabled);
	END()
	BEGIN(cmdq_destroy_qp)
	CMDQ_HDR(); FW(qp_cid); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DESTROY_QP))
	END()
	BEGIN(creq_destroy_qp_resp) CREQ(CREQ_DESTROY_QP_RESP); FW(xid); END()
	BEGIN(cmdq_modify_qp)
	CMDQ_HDR(); FW(qp_type); FW(modify_mask); FW(qp_cid);
	FM(network_type_en_sqd_async_notify_new_state, new_state, CMDQ_MODIFY_QP_NEW_STATE);
	FB(network_type_en_sqd_async_notify_new_state, en_sqd_async_notify,
	   CMDQ_MODIFY_QP_EN_SQD_ASYNC_NOTIFY);
	FM(network_type_en_sqd_async_notify_new_state, network_type, CMDQ_MODIFY_QP_NETWORK_TYPE);
	FW(access); FW(pkey); FW(qkey); FA(dgid); FW(flow_label); FW(sgid_index); FW(hop_limit);
	FW(traffic_class); FA(dest_mac);
	FM(tos_dscp_tos_ecn, tos_ecn, CMDQ_MODIFY_QP_TOS_ECN);
	FM(tos_dscp_tos_ecn, tos_dscp, CMDQ_MODIFY_QP_TOS_DSCP);
	FB(path_mtu_pingpong_push_enable, pingpong_push_enable, CMDQ_MODIFY_QP_PINGPONG_PUSH_ENABLE);
	FM(path_mtu_pingpong_push_enable, path_mtu, CMDQ_MODIFY_QP_PATH_MTU);
	FW(timeout); FW(retry_cnt); FW(rnr_retry); FW(min_rnr_timer); FW(rq_psn); FW(sq_psn);
	FW(max_rd_atomic); FW(max_dest_rd_atomic); FB(enable_cc, enable_cc, CMDQ_MODIFY_QP_ENABLE_CC);
	FW(sq_size); FW(rq_size); FW(sq_sge); FW(rq_sge); FW(max_inline_data); FW(dest_qp_id);
	FW(pingpong_push_dpi); FA(src_mac);
	FM(vlan_pcp_vlan_dei_vlan_id, vlan_id, CMDQ_MODIFY_QP_VLAN_ID);
	FB(vlan_pcp_vlan_dei_vlan_id, vlan_dei, CMDQ_MODIFY_QP_VLAN_DEI);
	FM(vlan_pcp_vlan_dei_vlan_id, vlan_pcp, CMDQ_MODIFY_QP_VLAN_PCP);
	FW(irrq_addr); FW(orrq_addr); FW(ext_modify_mask); FW(ext_stats_ctx_id); FW(schq_id);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_MODIFY_QP))
	END()
	BEGIN(creq_modify_qp_resp)
	CREQ(CREQ_MODIFY_QP_RESP); FW(xid);
	FB(pingpong_push_state_index_enabled, pingpong_push_enabled,
	   CREQ_MODIFY_QP_RESP_PINGPONG_PUSH_ENABLED);
	FM(pingpong_push_state_index_enabled, pingpong_push_index,
	   CREQ_MODIFY_QP_RESP_PINGPONG_PUSH_INDEX);
	FB(pingpong_push_state_index_enabled, pingpong_push_state,
	   CREQ_MODIFY_QP_RESP_PINGPONG_PUSH_STATE);
	FW(lag_src_mac);
	END()
	BEGIN(cmdq_query_qp)
	CMDQ_HDR(); FW(qp_cid);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_QUERY_QP);
	     d_.resp_size = (sizeof(struct creq_query_qp_resp_sb) + 15) / 16)
	END()
	BEGIN(creq_query_qp_resp) CREQ(CREQ_QUERY_QP_RESP); FW(size); END()
	BEGIN(creq_query_qp_resp_sb)
	SB_HDR(); FW(xid);
	FM(en_sqd_async_notify_state, state, CREQ_QUERY_QP_RESP_SB_STATE);
	FB(en_sqd_async_notify_state, en_sqd_async_notify, CREQ_QUERY_QP_RESP_SB_EN_SQD_ASYNC_NOTIFY);
	FW(access); FW(pkey); FW(qkey); FA(dgid); FW(flow_label); FW(sgid_index); FW(hop_limit);
	FW(traffic_class); FA(dest_mac);
	FM(path_mtu_dest_vlan_id, dest_vlan_id, CREQ_QUERY_QP_RESP_SB_DEST_VLAN_ID);
	FM(path_mtu_dest_vlan_id, path_mtu, CREQ_QUERY_QP_RESP_SB_PATH_MTU);
	FW(timeout); FW(retry_cnt); FW(rnr_retry); FW(min_rnr_timer); FW(rq_psn); FW(sq_psn);
	FW(max_rd_atomic); FW(max_dest_rd_atomic);
	FM(tos_dscp_tos_ecn, tos_ecn, CREQ_QUERY_QP_RESP_SB_TOS_ECN);
	FM(tos_dscp_tos_ecn, tos_dscp, CREQ_QUERY_QP_RESP_SB_TOS_DSCP);
	FB(enable_cc, enable_cc, CREQ_QUERY_QP_RESP_SB_ENABLE_CC);
	FW(sq_size); FW(rq_size); FW(sq_sge); FW(rq_sge); FW(max_inline_data); FW(dest_qp_id);
	FW(port_id); FW(stat_collection_id); FA(src_mac);
	FM(vlan_pcp_vlan_dei_vlan_id, vlan_id, CREQ_QUERY_QP_RESP_SB_VLAN_ID);
	FB(vlan_pcp_vlan_dei_vlan_id, vlan_dei, CREQ_QUERY_QP_RESP_SB_VLAN_DEI);
	FM(vlan_pcp_vlan_dei_vlan_id, vlan_pcp, CREQ_QUERY_QP_RESP_SB_VLAN_PCP);
	END()

	BEGIN(cmdq_create_cq)
	CMDQ_HDR(); FW(cq_handle); FM(pg_size_lvl, lvl, CMDQ_CREATE_CQ_LVL);
	FM(pg_size_lvl, pg_size, CMDQ_CREATE_CQ_PG_SIZE); FM(cq_fco_cnq_id, cnq_id, CMDQ_CREATE_CQ_CNQ_ID);
	FM(cq_fco_cnq_id, cq_fco, CMDQ_CREATE_CQ_CQ_FCO); FW(dpi); FW(cq_size); FW(pbl);
	FW(steering_tag);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_CREATE_CQ))
	END()
	BEGIN(creq_create_cq_resp) CREQ(CREQ_CREATE_CQ_RESP); FW(xid); END()
	BEGIN(cmdq_destroy_cq)
	CMDQ_HDR(); FW(cq_cid); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DESTROY_CQ))
	END()
	BEGIN(creq_destroy_cq_resp)
	CREQ(CREQ_DESTROY_CQ_RESP); FW(xid); FM(cq_arm_lvl, cq_arm_lvl, CREQ_DESTROY_CQ_RESP_CQ_ARM_LVL);
	FW(total_cnq_events);
	END()

	BEGIN(cmdq_allocate_mrw)
	CMDQ_HDR(); FW(mrw_handle); FM(mrw_flags, mrw_flags, CMDQ_ALLOCATE_MRW_MRW_FLAGS);
	FB(mrw_flags, steering_tag_valid, CMDQ_ALLOCATE_MRW_STEERING_TAG_VALID); FW(access);
	FW(steering_tag); FW(pd_id);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_ALLOCATE_MRW))
	END()
	BEGIN(creq_allocate_mrw_resp) CREQ(CREQ_ALLOCATE_MRW_RESP); FW(xid); END()
	BEGIN(cmdq_deallocate_key)
	CMDQ_HDR(); FM(mrw_flags, mrw_flags, CMDQ_DEALLOCATE_KEY_MRW_FLAGS); FW(key);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DEALLOCATE_KEY))
	END()
	BEGIN(creq_deallocate_key_resp)
	CREQ(CREQ_DEALLOCATE_KEY_RESP); FW(xid); FW(bound_window_info);
	END()
	BEGIN(cmdq_register_mr)
	CMDQ_HDR(); FM(log2_pg_size_lvl, lvl, CMDQ_REGISTER_MR_LVL);
	FM(log2_pg_size_lvl, log2_pg_size, CMDQ_REGISTER_MR_LOG2_PG_SIZE); FW(access);
	FM(log2_pbl_pg_size, log2_pbl_pg_size, CMDQ_REGISTER_MR_LOG2_PBL_PG_SIZE); FW(key);
	FW(pbl); FW(va); FW(mr_size); FW(steering_tag);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_REGISTER_MR))
	END()
	BEGIN(creq_register_mr_resp) CREQ(CREQ_REGISTER_MR_RESP); FW(xid); END()
	BEGIN(cmdq_deregister_mr)
	CMDQ_HDR(); FW(lkey); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DEREGISTER_MR))
	END()
	BEGIN(creq_deregister_mr_resp)
	CREQ(CREQ_DEREGISTER_MR_RESP); FW(xid); FW(bound_windows);
	END()

	BEGIN(cmdq_add_gid)
	CMDQ_HDR(); FA(gid); FA(src_mac); FM(vlan, vlan_id, CMDQ_ADD_GID_VLAN_VLAN_ID);
	FM(vlan, tpid, CMDQ_ADD_GID_VLAN_TPID); FB(vlan, vlan_en, CMDQ_ADD_GID_VLAN_VLAN_EN);
	FW(ipid); FM(stats_ctx, stats_ctx_id, CMDQ_ADD_GID_STATS_CTX_STATS_CTX_ID);
	FB(stats_ctx, stats_ctx_valid, CMDQ_ADD_GID_STATS_CTX_STATS_CTX_VALID);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_ADD_GID))
	END()
	BEGIN(creq_add_gid_resp) CREQ(CREQ_ADD_GID_RESP); FW(xid); END()
	BEGIN(cmdq_delete_gid)
	CMDQ_HDR(); FW(gid_index); DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_DELETE_GID))
	END()
	BEGIN(creq_delete_gid_resp) CREQ(CREQ_DELETE_GID_RESP); FW(xid); END()
	BEGIN(cmdq_modify_gid)
	CMDQ_HDR(); FA(gid); FA(src_mac); FM(vlan, vlan_id, CMDQ_MODIFY_GID_VLAN_VLAN_ID);
	FM(vlan, tpid, CMDQ_MODIFY_GID_VLAN_TPID); FB(vlan, vlan_en, CMDQ_MODIFY_GID_VLAN_VLAN_EN);
	FW(ipid); FW(gid_index); FM(stats_ctx, stats_ctx_id, CMDQ_MODIFY_GID_STATS_CTX_STATS_CTX_ID);
	FB(stats_ctx, stats_ctx_valid, CMDQ_MODIFY_GID_STATS_CTX_STATS_CTX_VALID);
	DFLT(CMDQ_PREP(CMDQ_BASE_OPCODE_MODIFY_GID))
	END()
}

#define CQE_TAIL(P) FB(cqe_type_toggle, toggle, P##_TOGGLE); \
	FM(cqe_type_toggle, cqe_type, P##_CQE_TYPE); FW(status)

static void dump_data_path(void)
{
	BEGIN(sq_sge) FW(va_or_pa); FW(l_key); FW(size); END()
	BEGIN(sq_send_hdr)
	FW(wqe_type); FW(flags); FW(wqe_size); FW(inv_key_or_imm_data); FW(length); FW(q_key);
	FM(dst_qp, dst_qp, SQ_SEND_HDR_DST_QP); FM(avid, avid, SQ_SEND_HDR_AVID);
	FM(timestamp, timestamp, SQ_SEND_HDR_TIMESTAMP);
	END()
	BEGIN(sq_rdma_hdr)
	FW(wqe_type); FW(flags); FW(wqe_size); FW(imm_data); FW(length); FW(remote_va);
	FW(remote_key); FM(timestamp, timestamp, SQ_RDMA_HDR_TIMESTAMP);
	END()
	BEGIN(rq_wqe_hdr)
	FW(wqe_type); FW(flags); FW(wqe_size); FM(wr_id[0], wr_id, RQ_WQE_HDR_WR_ID);
	DFLT(d_.wqe_type = RQ_WQE_HDR_WQE_TYPE_RCV)
	END()
	BEGIN(sq_psn_search_ext)
	FM(opcode_start_psn, start_psn, SQ_PSN_SEARCH_EXT_START_PSN);
	FM(opcode_start_psn, opcode, SQ_PSN_SEARCH_EXT_OPCODE);
	FM(flags_next_psn, next_psn, SQ_PSN_SEARCH_EXT_NEXT_PSN);
	FM(flags_next_psn, flags, SQ_PSN_SEARCH_EXT_FLAGS); FW(start_slot_idx);
	END()
	BEGIN(sq_msn_search)
	FM(start_idx_next_psn_start_psn, start_psn, SQ_MSN_SEARCH_START_PSN);
	FM(start_idx_next_psn_start_psn, next_psn, SQ_MSN_SEARCH_NEXT_PSN);
	FM(start_idx_next_psn_start_psn, start_idx, SQ_MSN_SEARCH_START_IDX);
	END()
	BEGIN(cq_base) CQE_TAIL(CQ_BASE); END()
	BEGIN(cq_req)
	FW(qp_handle); FW(sq_cons_idx); CQE_TAIL(CQ_REQ); FB(cqe_type_toggle, push, CQ_REQ_PUSH);
	END()
	BEGIN(cq_res_rc)
	FW(length); FW(imm_data_or_inv_r_key); FW(qp_handle); FW(mr_handle); CQE_TAIL(CQ_RES_RC);
	FW(flags); FM(srq_or_rq_wr_id, srq_or_rq_wr_id, CQ_RES_RC_SRQ_OR_RQ_WR_ID);
	END()
	BEGIN(cq_res_ud)
	FM(length, length, CQ_RES_UD_LENGTH); FW(cfa_metadata); FW(imm_data); FW(qp_handle);
	FA(src_mac); FW(src_qp_low); CQE_TAIL(CQ_RES_UD); FW(flags);
	FM(src_qp_high_srq_or_rq_wr_id, srq_or_rq_wr_id, CQ_RES_UD_SRQ_OR_RQ_WR_ID);
	FM(src_qp_high_srq_or_rq_wr_id, src_qp_high, CQ_RES_UD_SRC_QP_HIGH);
	END()
	BEGIN(cq_terminal)
	FW(qp_handle); FW(sq_cons_idx); FW(rq_cons_idx); CQE_TAIL(CQ_TERMINAL);
	END()
	BEGIN(cq_cutoff)
	CQE_TAIL(CQ_CUTOFF); FM(cqe_type_toggle, resize_toggle, CQ_CUTOFF_RESIZE_TOGGLE);
	END()
	BEGIN(nq_cn)
	FM(type, type, NQ_CN_TYPE); FM(type, toggle, NQ_CN_TOGGLE); FW(cq_handle_low);
	FB(v, v, NQ_CN_V); FW(cq_handle_high);
	END()
	BEGIN(dbc_dbc)
	FM(index, index, DBC_DBC_INDEX); FB(index, epoch, DBC_DBC_EPOCH);
	FM(index, toggle, DBC_DBC_TOGGLE); FM(type_path_xid, xid, DBC_DBC_XID);
	FM(type_path_xid, path, DBC_DBC_PATH); FB(type_path_xid, valid, DBC_DBC_VALID);
	FB(type_path_xid, debug_trace, DBC_DBC_DEBUG_TRACE); FM(type_path_xid, type, DBC_DBC_TYPE);
	END()
}

static void dump_constants(void)
{
/* stringize at each macro's own level: the kernel's names are macros themselves */
#define PRINT_CONSTANT(str, expr) printf("C %s %" PRIx64 "\n", str, (uint64_t)(expr));
#define KN(name, expr) PRINT_CONSTANT(#name, expr)
#define K(name) PRINT_CONSTANT(#name, name)
#define KS(name, sft) PRINT_CONSTANT(#name, (name) >> (sft))
#include "constants.def"
#undef K
#undef KS
#undef KN
#undef PRINT_CONSTANT
}

/* ---- entries ------------------------------------------------------------------------------ */

static size_t parse_hex(const char *s, uint8_t *out)
{
	size_t n = 0;
	if (strcmp(s, "-") == 0)
		return 0;
	for (; s[0] && s[1]; s += 2) {
		unsigned b;
		sscanf(s, "%2x", &b);
		out[n++] = (uint8_t)b;
	}
	return n;
}

/* n sq_sge read from the line after the header, written from out + 32 on; returns the total */
static uint32_t put_sges(char **save, int n, uint8_t *out)
{
	struct sq_sge *sge = (struct sq_sge *)(out + sizeof(struct sq_send_hdr));
	uint32_t total = 0;
	for (int i = 0; i < n; i++) {
		uint64_t va = strtoull(strtok_r(NULL, " ", save), NULL, 0);
		uint32_t len = (uint32_t)strtoul(strtok_r(NULL, " ", save), NULL, 0);
		uint32_t key = (uint32_t)strtoul(strtok_r(NULL, " ", save), NULL, 0);
		sge[i].va_or_pa = htole64(va);
		sge[i].l_key = htole32(key);
		sge[i].size = htole32(len);
		total += len;
	}
	return total;
}

static size_t entry_bytes(int mode, unsigned used_slots)
{
	return mode == 0 ? 128 : used_slots * sizeof(struct sq_sge);
}

static void entries(void)
{
	char line[8192];
	uint8_t out[4096], data[4096];
	while (fgets(line, sizeof line, stdin)) {
		char *save = NULL;
		char *kind = strtok_r(line, " \n", &save);
		if (!kind)
			continue;
		memset(out, 0, sizeof out);
		if (strcmp(kind, "DB") == 0) {
			struct dbc_dbc d;
			uint32_t type = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
			uint32_t xid = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
			uint32_t index = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
			uint32_t epoch = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
			uint32_t toggle = (uint32_t)strtoul(strtok_r(NULL, " \n", &save), NULL, 0);
			/* as qplib_res.h bnxt_qplib_ring_db builds the key */
			d.index = htole32(((index << DBC_DBC_INDEX_SFT) & DBC_DBC_INDEX_MASK) |
					  (epoch ? DBC_DBC_EPOCH : 0) |
					  ((toggle << DBC_DBC_TOGGLE_SFT) & DBC_DBC_TOGGLE_MASK));
			d.type_path_xid = htole32(((xid << DBC_DBC_XID_SFT) & DBC_DBC_XID_MASK) |
						  DBC_DBC_PATH_ROCE | DBC_DBC_VALID |
						  ((type << DBC_DBC_TYPE_SFT) & DBC_DBC_TYPE_MASK));
			hex(&d, sizeof d);
			printf("\n");
			continue;
		}
		if (strcmp(kind, "GID") == 0) {
			struct cmdq_add_gid req;
			uint8_t gid[16], mac[6];
			uint32_t w[4];
			uint16_t m[3];
			parse_hex(strtok_r(NULL, " ", &save), gid);
			parse_hex(strtok_r(NULL, " \n", &save), mac);
			memcpy(w, gid, 16);
			memcpy(m, mac, 6);
			memset(&req, 0, sizeof req);
			req.opcode = CMDQ_BASE_OPCODE_ADD_GID;
			req.cmd_size = (sizeof req + 15) / 16;
			/* qplib_sp.c bnxt_qplib_add_sgid: gid[i] = cpu_to_be32(word 3 - i),
			 * src_mac[i] = cpu_to_be16(pair i) */
			for (int i = 0; i < 4; i++)
				req.gid[i] = htobe32(w[3 - i]);
			for (int i = 0; i < 3; i++)
				req.src_mac[i] = htobe16(m[i]);
			hex(&req, sizeof req);
			printf("\n");
			continue;
		}
		int mode = atoi(strtok_r(NULL, " ", &save));
		if (strcmp(kind, "RECV") == 0) {
			struct rq_wqe_hdr *h = (struct rq_wqe_hdr *)out;
			uint32_t wr_id = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
			int n = atoi(strtok_r(NULL, " \n", &save));
			put_sges(&save, n, out);
			h->wqe_type = RQ_WQE_HDR_WQE_TYPE_RCV;
			h->wqe_size = (u8)(2 + n);
			h->wr_id[0] = htole32((wr_id << RQ_WQE_HDR_WR_ID_SFT) & RQ_WQE_HDR_WR_ID_MASK);
			hex(out, entry_bytes(mode, 2 + n));
			printf("\n");
			continue;
		}
		int sig = atoi(strtok_r(NULL, " ", &save));
		u8 flags = sig ? SQ_SEND_HDR_FLAGS_SIGNAL_COMP : 0;
		if (strcmp(kind, "SEND") == 0 || strcmp(kind, "SENDI") == 0) {
			struct sq_send_hdr *h = (struct sq_send_hdr *)out;
			unsigned slots;
			uint32_t len;
			if (strcmp(kind, "SEND") == 0) {
				int n = atoi(strtok_r(NULL, " \n", &save));
				len = put_sges(&save, n, out);
				slots = (unsigned)n;
			} else {
				size_t dlen = parse_hex(strtok_r(NULL, " \n", &save), data);
				memcpy(out + sizeof *h, data, dlen);
				len = (uint32_t)dlen;
				slots = (unsigned)((dlen + 15) / 16);
				flags |= SQ_SEND_HDR_FLAGS_INLINE;
			}
			h->wqe_type = SQ_SEND_HDR_WQE_TYPE_SEND;
			h->flags = flags;
			h->wqe_size = (u8)(2 + slots);
			h->length = htole32(len);
			hex(out, entry_bytes(mode, 2 + slots));
			printf("\n");
			continue;
		}
		/* WRITE, WRITEI, READ */
		struct sq_rdma_hdr *h = (struct sq_rdma_hdr *)out;
		uint64_t raddr = strtoull(strtok_r(NULL, " ", &save), NULL, 0);
		uint32_t rkey = (uint32_t)strtoul(strtok_r(NULL, " ", &save), NULL, 0);
		unsigned slots;
		uint32_t len;
		if (strcmp(kind, "WRITEI") == 0) {
			size_t dlen = parse_hex(strtok_r(NULL, " \n", &save), data);
			memcpy(out + sizeof *h, data, dlen);
			len = (uint32_t)dlen;
			slots = (unsigned)((dlen + 15) / 16);
			flags |= SQ_RDMA_HDR_FLAGS_INLINE;
		} else {
			int n = atoi(strtok_r(NULL, " \n", &save));
			len = put_sges(&save, n, out);
			slots = (unsigned)n;
		}
		h->wqe_type = strcmp(kind, "READ") == 0 ? SQ_RDMA_HDR_WQE_TYPE_READ_WQE
							 : SQ_RDMA_HDR_WQE_TYPE_WRITE_WQE;
		h->flags = flags;
		h->wqe_size = (u8)(2 + slots);
		h->length = htole32(len);
		h->remote_va = htole64(raddr);
		h->remote_key = htole32(rkey);
		hex(out, entry_bytes(mode, 2 + slots));
		printf("\n");
	}
}

/* sim/bnxt's further requests: resource caps, frees, the PHY, the async event completion */
static void dump_model(void)
{
	BEGIN(hwrm_func_resource_qcaps_input)
	HWRM_REQ(); FW(fid);
	DFLT(HWRM_PREP(HWRM_FUNC_RESOURCE_QCAPS); d_.fid = htole16(0xffff))
	END()
	BEGIN(hwrm_func_resource_qcaps_output)
	HWRM_RESP(); FW(max_vfs); FW(max_msix); FW(vf_reservation_strategy); FW(min_rsscos_ctx);
	FW(max_rsscos_ctx); FW(min_cmpl_rings); FW(max_cmpl_rings); FW(min_tx_rings);
	FW(max_tx_rings); FW(min_rx_rings); FW(max_rx_rings); FW(min_l2_ctxs); FW(max_l2_ctxs);
	FW(min_vnics); FW(max_vnics); FW(min_stat_ctx); FW(max_stat_ctx); FW(min_hw_ring_grps);
	FW(max_hw_ring_grps); FW(max_tx_scheduler_inputs); FW(flags); FW(min_msix); FW(valid);
	END()
	BEGIN(hwrm_vnic_free_input)
	HWRM_REQ(); FW(vnic_id);
	DFLT(HWRM_PREP(HWRM_VNIC_FREE))
	END()
	BEGIN(hwrm_cfa_l2_filter_free_input)
	HWRM_REQ(); FW(l2_filter_id);
	DFLT(HWRM_PREP(HWRM_CFA_L2_FILTER_FREE))
	END()
	BEGIN(hwrm_port_phy_qcfg_input)
	HWRM_REQ(); FW(port_id);
	DFLT(HWRM_PREP(HWRM_PORT_PHY_QCFG))
	END()
	BEGIN(hwrm_port_phy_qcfg_output)
	HWRM_RESP(); FW(link); FW(active_fec_signal_mode); FW(link_speed); FW(duplex_cfg);
	FW(pause); FW(support_speeds); FW(force_link_speed); FW(auto_mode); FW(auto_pause);
	FW(auto_link_speed); FW(auto_link_speed_mask); FW(phy_type); FW(media_type);
	FW(duplex_state); FW(option_flags); FW(support_pam4_speeds); FW(support_speeds2);
	FW(active_lanes); FW(valid);
	END()
	BEGIN(hwrm_port_phy_qcaps_input)
	HWRM_REQ(); FW(port_id);
	DFLT(HWRM_PREP(HWRM_PORT_PHY_QCAPS))
	END()
	BEGIN(hwrm_port_phy_qcaps_output)
	HWRM_RESP(); FW(flags); FW(port_cnt); FW(supported_speeds_force_mode);
	FW(supported_speeds_auto_mode); FW(supported_speeds_eee_mode); FW(tx_lpi_timer_low);
	FW(valid_tx_lpi_timer_high); FW(supported_pam4_speeds_auto_mode);
	FW(supported_pam4_speeds_force_mode); FW(flags2); FW(internal_port_cnt);
	FW(supported_speeds2_force_mode); FW(supported_speeds2_auto_mode); FW(valid);
	END()
	BEGIN(hwrm_queue_qportcfg_input)
	HWRM_REQ(); FW(flags); FW(port_id); FW(drv_qmap_cap);
	DFLT(HWRM_PREP(HWRM_QUEUE_QPORTCFG))
	END()
	BEGIN(hwrm_queue_qportcfg_output)
	HWRM_RESP(); FW(max_configurable_queues); FW(max_configurable_lossless_queues);
	FW(queue_cfg_allowed); FW(queue_cfg_info); FW(queue_pfcenable_cfg_allowed);
	FW(queue_pri2cos_cfg_allowed); FW(queue_cos2bw_cfg_allowed);
	FW(queue_id0); FW(queue_id0_service_profile); FW(queue_id1); FW(queue_id1_service_profile);
	FW(queue_id2); FW(queue_id2_service_profile); FW(queue_id3); FW(queue_id3_service_profile);
	FW(queue_id4); FW(queue_id4_service_profile); FW(queue_id5); FW(queue_id5_service_profile);
	FW(queue_id6); FW(queue_id6_service_profile); FW(queue_id7); FW(queue_id7_service_profile);
	FW(queue_id0_service_profile_type); FA(qid0_name); FW(valid);
	END()
	BEGIN(hwrm_fw_set_time_input)
	HWRM_REQ(); FW(year); FW(month); FW(day); FW(hour); FW(minute); FW(second);
	FW(millisecond); FW(zone);
	DFLT(HWRM_PREP(HWRM_FW_SET_TIME))
	END()
	BEGIN(hwrm_async_event_cmpl)
	FM(type, type, ASYNC_EVENT_CMPL_TYPE); FW(event_id); FW(event_data2);
	FB(opaque_v, v, ASYNC_EVENT_CMPL_V); FM(opaque_v, opaque, ASYNC_EVENT_CMPL_OPAQUE);
	FW(timestamp_lo); FW(timestamp_hi); FW(event_data1);
	END()
	BEGIN(hwrm_async_event_cmpl_reset_notify)
	FM(type, type, ASYNC_EVENT_CMPL_RESET_NOTIFY_TYPE); FW(event_id); FW(event_data2);
	FB(opaque_v, v, ASYNC_EVENT_CMPL_RESET_NOTIFY_V);
	FM(opaque_v, opaque, ASYNC_EVENT_CMPL_RESET_NOTIFY_OPAQUE);
	FW(timestamp_lo); FW(timestamp_hi); FW(event_data1);
	END()
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "entries") == 0) {
		entries();
		return 0;
	}
	dump_hwrm();
	dump_backing_store();
	dump_rings();
	dump_model();
	dump_rcfw();
	dump_data_path();
	dump_constants();
	return 0;
}
