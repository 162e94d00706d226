#pragma once
// The HWRM requests and responses of the RoCE bring-up path (bnxt_en's bnxt.c
// bnxt_fw_init_one_p1/p2 and bnxt_re's main.c bnxt_re_dev_init send them),
// laid out as Linux 6.12 bnxt_hsi.h lays them out. Each list names the kernel struct it follows;
// fields not listed are written as zero (reserved, or not used by a RoCE-only driver).
#include "abi/bnxt/hwrm.hpp"

namespace rig::bnxt::abi {

// ---- HWRM_VER_GET (bnxt_hsi.h): the first request; learn window sizes, timeouts, chip -----------

#define RIG_BNXT_HWRM_VER_GET_INPUT(W, D, F, A)                    \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_VER_GET)                          \
    D(hwrm_intf_maj, std::uint8_t, 16, HWRM_VERSION_MAJOR)         \
    D(hwrm_intf_min, std::uint8_t, 17, HWRM_VERSION_MINOR)         \
    D(hwrm_intf_upd, std::uint8_t, 18, HWRM_VERSION_UPDATE)
RIG_BNXT_LAYOUT(hwrm_ver_get_input, 24, RIG_BNXT_HWRM_VER_GET_INPUT);

#define RIG_BNXT_HWRM_VER_GET_OUTPUT(W, D, F, A)                   \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(hwrm_intf_maj_8b, std::uint8_t, 8)                           \
    W(hwrm_intf_min_8b, std::uint8_t, 9)                           \
    W(hwrm_intf_upd_8b, std::uint8_t, 10)                          \
    W(hwrm_fw_maj_8b, std::uint8_t, 12)                            \
    W(hwrm_fw_min_8b, std::uint8_t, 13)                            \
    W(hwrm_fw_bld_8b, std::uint8_t, 14)                            \
    W(dev_caps_cfg, std::uint32_t, 24)                             \
    W(roce_fw_maj_8b, std::uint8_t, 28)                            \
    W(roce_fw_min_8b, std::uint8_t, 29)                            \
    W(roce_fw_bld_8b, std::uint8_t, 30)                            \
    A(hwrm_fw_name, 32, 16)                                        \
    A(roce_fw_name, 96, 16)                                        \
    W(chip_num, std::uint16_t, 112)                                \
    W(chip_rev, std::uint8_t, 114)                                 \
    W(chip_metal, std::uint8_t, 115)                               \
    W(chip_bond_id, std::uint8_t, 116)                             \
    W(chip_platform_type, std::uint8_t, 117)                       \
    W(max_req_win_len, std::uint16_t, 118)                         \
    W(max_resp_len, std::uint16_t, 120)                            \
    W(def_req_timeout, std::uint16_t, 122)                         \
    W(flags, std::uint8_t, 124)                                    \
    W(always_1, std::uint8_t, 127)                                 \
    W(hwrm_intf_major, std::uint16_t, 128)                         \
    W(hwrm_intf_minor, std::uint16_t, 130)                         \
    W(hwrm_intf_build, std::uint16_t, 132)                         \
    W(hwrm_intf_patch, std::uint16_t, 134)                         \
    W(roce_fw_major, std::uint16_t, 160)                           \
    W(roce_fw_minor, std::uint16_t, 162)                           \
    W(roce_fw_build, std::uint16_t, 164)                           \
    W(roce_fw_patch, std::uint16_t, 166)                           \
    W(max_ext_req_len, std::uint16_t, 168)                         \
    W(max_req_timeout, std::uint16_t, 170)                         \
    RIG_BNXT_HWRM_VALID(W, 176)
RIG_BNXT_LAYOUT(hwrm_ver_get_output, 176, RIG_BNXT_HWRM_VER_GET_OUTPUT);

// ---- HWRM_FUNC_RESET, FUNC_DRV_RGTR / UNRGTR ----------------------------------------------------

#define RIG_BNXT_HWRM_FUNC_RESET_INPUT(W, D, F, A)                 \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_RESET)                       \
    W(enables, std::uint32_t, 16)                                  \
    W(vf_id, std::uint16_t, 20)                                    \
    W(func_reset_level, std::uint8_t, 22)
RIG_BNXT_LAYOUT(hwrm_func_reset_input, 24, RIG_BNXT_HWRM_FUNC_RESET_INPUT);

// The plain 16-byte response of requests that return nothing but success (FUNC_RESET, RING_FREE,
// VNIC_CFG, FUNC_BACKING_STORE_CFG(_V2), …: bnxt_hsi.h spells each `unused_0[7]; valid`).
#define RIG_BNXT_HWRM_FUNC_RESET_OUTPUT(W, D, F, A) RIG_BNXT_HWRM_RESP(W) RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_func_reset_output, 16, RIG_BNXT_HWRM_FUNC_RESET_OUTPUT);

#define RIG_BNXT_HWRM_FUNC_DRV_RGTR_INPUT(W, D, F, A)              \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_DRV_RGTR)                    \
    W(flags, std::uint32_t, 16)                                    \
    W(enables, std::uint32_t, 20)                                  \
    W(os_type, std::uint16_t, 24)                                  \
    W(ver_maj_8b, std::uint8_t, 26)                                \
    W(ver_min_8b, std::uint8_t, 27)                                \
    W(ver_upd_8b, std::uint8_t, 28)                                \
    W(timestamp, std::uint32_t, 32)                                \
    A(vf_req_fwd, 40, 32)                                          \
    A(async_event_fwd, 72, 32)                                     \
    W(ver_maj, std::uint16_t, 104)                                 \
    W(ver_min, std::uint16_t, 106)                                 \
    W(ver_upd, std::uint16_t, 108)                                 \
    W(ver_patch, std::uint16_t, 110)
RIG_BNXT_LAYOUT(hwrm_func_drv_rgtr_input, 112, RIG_BNXT_HWRM_FUNC_DRV_RGTR_INPUT);

#define RIG_BNXT_HWRM_FUNC_DRV_RGTR_OUTPUT(W, D, F, A)             \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(flags, std::uint32_t, 8)                                     \
    RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_func_drv_rgtr_output, 16, RIG_BNXT_HWRM_FUNC_DRV_RGTR_OUTPUT);

#define RIG_BNXT_HWRM_FUNC_DRV_UNRGTR_INPUT(W, D, F, A)            \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_DRV_UNRGTR)                  \
    W(flags, std::uint32_t, 16)
RIG_BNXT_LAYOUT(hwrm_func_drv_unrgtr_input, 24, RIG_BNXT_HWRM_FUNC_DRV_UNRGTR_INPUT);

// ---- HWRM_FUNC_QCAPS, FUNC_QCFG, FUNC_CFG -------------------------------------------------------

#define RIG_BNXT_HWRM_FUNC_QCAPS_INPUT(W, D, F, A)                 \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_QCAPS)                       \
    D(fid, std::uint16_t, 16, 0xffff)
RIG_BNXT_LAYOUT(hwrm_func_qcaps_input, 24, RIG_BNXT_HWRM_FUNC_QCAPS_INPUT);

#define RIG_BNXT_HWRM_FUNC_QCAPS_OUTPUT(W, D, F, A)                \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(fid, std::uint16_t, 8)                                       \
    W(port_id, std::uint16_t, 10)                                  \
    W(flags, std::uint32_t, 12)                                    \
    A(mac_address, 16, 6)                                          \
    W(max_rsscos_ctx, std::uint16_t, 22)                           \
    W(max_cmpl_rings, std::uint16_t, 24)                           \
    W(max_tx_rings, std::uint16_t, 26)                             \
    W(max_rx_rings, std::uint16_t, 28)                             \
    W(max_l2_ctxs, std::uint16_t, 30)                              \
    W(max_vnics, std::uint16_t, 32)                                \
    W(first_vf_id, std::uint16_t, 34)                              \
    W(max_vfs, std::uint16_t, 36)                                  \
    W(max_stat_ctx, std::uint16_t, 38)                             \
    W(max_hw_ring_grps, std::uint32_t, 72)                         \
    W(max_sp_tx_rings, std::uint16_t, 76)                          \
    W(max_msix_vfs, std::uint16_t, 78)                             \
    W(flags_ext, std::uint32_t, 80)                                \
    W(flags_ext2, std::uint32_t, 88)                               \
    W(roce_vf_max_av, std::uint32_t, 108)                          \
    W(roce_vf_max_cq, std::uint32_t, 112)                          \
    W(roce_vf_max_mrw, std::uint32_t, 116)                         \
    W(roce_vf_max_qp, std::uint32_t, 120)                          \
    W(roce_vf_max_srq, std::uint32_t, 124)                         \
    W(roce_vf_max_gid, std::uint32_t, 128)                         \
    W(flags_ext3, std::uint32_t, 132)                              \
    W(max_roce_vfs, std::uint16_t, 136)                            \
    RIG_BNXT_HWRM_VALID(W, 144)
RIG_BNXT_LAYOUT(hwrm_func_qcaps_output, 144, RIG_BNXT_HWRM_FUNC_QCAPS_OUTPUT);

#define RIG_BNXT_HWRM_FUNC_QCFG_INPUT(W, D, F, A)                  \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_QCFG)                        \
    D(fid, std::uint16_t, 16, 0xffff)
RIG_BNXT_LAYOUT(hwrm_func_qcfg_input, 24, RIG_BNXT_HWRM_FUNC_QCFG_INPUT);

// db_offset/db_size (FUNC_QCFG, bnxt_hsi.h) come from l2_doorbell_bar_size_kb and
// legacy_l2_db_size_kb.
#define RIG_BNXT_HWRM_FUNC_QCFG_OUTPUT(W, D, F, A)                 \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(fid, std::uint16_t, 8)                                       \
    W(port_id, std::uint16_t, 10)                                  \
    W(vlan, std::uint16_t, 12)                                     \
    W(flags, std::uint16_t, 14)                                    \
    A(mac_address, 16, 6)                                          \
    W(pci_id, std::uint16_t, 22)                                   \
    W(alloc_rsscos_ctx, std::uint16_t, 24)                         \
    W(alloc_cmpl_rings, std::uint16_t, 26)                         \
    W(alloc_tx_rings, std::uint16_t, 28)                           \
    W(alloc_rx_rings, std::uint16_t, 30)                           \
    W(alloc_l2_ctx, std::uint16_t, 32)                             \
    W(alloc_vnics, std::uint16_t, 34)                              \
    W(admin_mtu, std::uint16_t, 36)                                \
    W(mru, std::uint16_t, 38)                                      \
    W(stat_ctx_id, std::uint16_t, 40)                              \
    W(dflt_vnic_id, std::uint16_t, 44)                             \
    W(max_mtu_configured, std::uint16_t, 46)                       \
    W(alloc_stat_ctx, std::uint16_t, 70)                           \
    W(alloc_msix, std::uint16_t, 72)                               \
    W(l2_doorbell_bar_size_kb, std::uint16_t, 76)                  \
    W(legacy_l2_db_size_kb, std::uint16_t, 84)                     \
    W(db_page_size, std::uint8_t, 89)                              \
    W(roce_vnic_id, std::uint16_t, 90)                             \
    W(host_mtu, std::uint16_t, 100)                                \
    W(roce_max_av_per_vf, std::uint32_t, 132)                      \
    W(roce_max_cq_per_vf, std::uint32_t, 136)                      \
    W(roce_max_mrw_per_vf, std::uint32_t, 140)                     \
    W(roce_max_qp_per_vf, std::uint32_t, 144)                      \
    W(roce_max_srq_per_vf, std::uint32_t, 148)                     \
    W(roce_max_gid_per_vf, std::uint32_t, 152)                     \
    RIG_BNXT_HWRM_VALID(W, 160)
RIG_BNXT_LAYOUT(hwrm_func_qcfg_output, 160, RIG_BNXT_HWRM_FUNC_QCFG_OUTPUT);

// Resource reservation (bnxt_hsi.h HWRM_FUNC_CFG): num_msix counts the NQs, RoCE's included.
#define RIG_BNXT_HWRM_FUNC_CFG_INPUT(W, D, F, A)                   \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_CFG)                         \
    D(fid, std::uint16_t, 16, 0xffff)                              \
    W(num_msix, std::uint16_t, 18)                                 \
    W(flags, std::uint32_t, 20)                                    \
    W(enables, std::uint32_t, 24)                                  \
    W(admin_mtu, std::uint16_t, 28)                                \
    W(mru, std::uint16_t, 30)                                      \
    W(num_rsscos_ctxs, std::uint16_t, 32)                          \
    W(num_cmpl_rings, std::uint16_t, 34)                           \
    W(num_tx_rings, std::uint16_t, 36)                             \
    W(num_rx_rings, std::uint16_t, 38)                             \
    W(num_l2_ctxs, std::uint16_t, 40)                              \
    W(num_vnics, std::uint16_t, 42)                                \
    W(num_stat_ctxs, std::uint16_t, 44)                            \
    W(num_hw_ring_grps, std::uint16_t, 46)                         \
    A(dflt_mac_addr, 48, 6)                                        \
    W(dflt_vlan, std::uint16_t, 54)                                \
    W(async_event_cr, std::uint16_t, 80)                           \
    W(options, std::uint8_t, 85)                                   \
    W(host_mtu, std::uint16_t, 102)                                \
    W(flags2, std::uint32_t, 104)                                  \
    W(enables2, std::uint32_t, 108)                                \
    W(roce_max_av_per_vf, std::uint32_t, 132)                      \
    W(roce_max_cq_per_vf, std::uint32_t, 136)                      \
    W(roce_max_mrw_per_vf, std::uint32_t, 140)                     \
    W(roce_max_qp_per_vf, std::uint32_t, 144)                      \
    W(roce_max_srq_per_vf, std::uint32_t, 148)                     \
    W(roce_max_gid_per_vf, std::uint32_t, 152)
RIG_BNXT_LAYOUT(hwrm_func_cfg_input, 160, RIG_BNXT_HWRM_FUNC_CFG_INPUT);

// ---- context memory: FUNC_BACKING_STORE_QCAPS / CFG (P5) and their _V2 (P7, bnxt.c
// bnxt_alloc_ctx_mem) ----

#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_INPUT(W, D, F, A)   \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_BACKING_STORE_QCAPS)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_qcaps_input, 16,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_INPUT);

#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_OUTPUT(W, D, F, A)  \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(qp_max_entries, std::uint32_t, 8)                            \
    W(qp_min_qp1_entries, std::uint16_t, 12)                       \
    W(qp_max_l2_entries, std::uint16_t, 14)                        \
    W(qp_entry_size, std::uint16_t, 16)                            \
    W(srq_max_l2_entries, std::uint16_t, 18)                       \
    W(srq_max_entries, std::uint32_t, 20)                          \
    W(srq_entry_size, std::uint16_t, 24)                           \
    W(cq_max_l2_entries, std::uint16_t, 26)                        \
    W(cq_max_entries, std::uint32_t, 28)                           \
    W(cq_entry_size, std::uint16_t, 32)                            \
    W(vnic_max_vnic_entries, std::uint16_t, 34)                    \
    W(vnic_max_ring_table_entries, std::uint16_t, 36)              \
    W(vnic_entry_size, std::uint16_t, 38)                          \
    W(stat_max_entries, std::uint32_t, 40)                         \
    W(stat_entry_size, std::uint16_t, 44)                          \
    W(tqm_entry_size, std::uint16_t, 46)                           \
    W(tqm_min_entries_per_ring, std::uint32_t, 48)                 \
    W(tqm_max_entries_per_ring, std::uint32_t, 52)                 \
    W(mrav_max_entries, std::uint32_t, 56)                         \
    W(mrav_entry_size, std::uint16_t, 60)                          \
    W(tim_entry_size, std::uint16_t, 62)                           \
    W(tim_max_entries, std::uint32_t, 64)                          \
    W(mrav_num_entries_units, std::uint16_t, 68)                   \
    W(tqm_entries_multiple, std::uint8_t, 70)                      \
    W(ctx_kind_initializer, std::uint8_t, 71)                      \
    W(ctx_init_mask, std::uint16_t, 72)                            \
    W(qp_init_offset, std::uint8_t, 74)                            \
    W(srq_init_offset, std::uint8_t, 75)                           \
    W(cq_init_offset, std::uint8_t, 76)                            \
    W(vnic_init_offset, std::uint8_t, 77)                          \
    W(tqm_fp_rings_count, std::uint8_t, 78)                        \
    W(stat_init_offset, std::uint8_t, 79)                          \
    W(mrav_init_offset, std::uint8_t, 80)                          \
    W(tqm_fp_rings_count_ext, std::uint8_t, 81)                    \
    W(fast_qpmd_qp_num_entries, std::uint16_t, 96)                 \
    RIG_BNXT_HWRM_VALID(W, 104)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_qcaps_output, 104,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_OUTPUT);

// One context type's three fields in FUNC_BACKING_STORE_CFG: its pg_size_lvl byte (level in
// bits 0-3, page size in bits 4-7), its page directory and its entry count.
#define RIG_BNXT_BS_TYPE(W, F, t, lvl_off, dir_off, num_off)       \
    F(t##_lvl, std::uint8_t, lvl_off, 0x0f, 0)                     \
    F(t##_pg_size, std::uint8_t, lvl_off, 0xf0, 4)                 \
    W(t##_page_dir, std::uint64_t, dir_off)                        \
    W(t##_num_entries, std::uint32_t, num_off)

// The QP type names its pg_size_lvl byte and page directory "qpc" but its count "qp".
#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_CFG_INPUT(W, D, F, A)     \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_BACKING_STORE_CFG)           \
    W(flags, std::uint32_t, 16)                                    \
    W(enables, std::uint32_t, 20)                                  \
    F(qpc_lvl, std::uint8_t, 24, 0x0f, 0)                          \
    F(qpc_pg_size, std::uint8_t, 24, 0xf0, 4)                      \
    W(qpc_page_dir, std::uint64_t, 40)                             \
    W(qp_num_entries, std::uint32_t, 168)                          \
    RIG_BNXT_BS_TYPE(W, F, srq, 25, 48, 172)                       \
    RIG_BNXT_BS_TYPE(W, F, cq, 26, 56, 176)                        \
    F(vnic_lvl, std::uint8_t, 27, 0x0f, 0)                         \
    F(vnic_pg_size, std::uint8_t, 27, 0xf0, 4)                     \
    W(vnic_page_dir, std::uint64_t, 64)                            \
    RIG_BNXT_BS_TYPE(W, F, stat, 28, 72, 180)                      \
    RIG_BNXT_BS_TYPE(W, F, tqm_sp, 29, 80, 184)                    \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring0, 30, 88, 188)                 \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring1, 31, 96, 192)                 \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring2, 32, 104, 196)                \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring3, 33, 112, 200)                \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring4, 34, 120, 204)                \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring5, 35, 128, 208)                \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring6, 36, 136, 212)                \
    RIG_BNXT_BS_TYPE(W, F, tqm_ring7, 37, 144, 216)                \
    RIG_BNXT_BS_TYPE(W, F, mrav, 38, 152, 220)                     \
    RIG_BNXT_BS_TYPE(W, F, tim, 39, 160, 224)                      \
    W(qp_num_qp1_entries, std::uint16_t, 228)                      \
    W(qp_num_l2_entries, std::uint16_t, 230)                       \
    W(qp_entry_size, std::uint16_t, 232)                           \
    W(srq_num_l2_entries, std::uint16_t, 234)                      \
    W(srq_entry_size, std::uint16_t, 236)                          \
    W(cq_num_l2_entries, std::uint16_t, 238)                       \
    W(cq_entry_size, std::uint16_t, 240)                           \
    W(vnic_num_vnic_entries, std::uint16_t, 242)                   \
    W(vnic_num_ring_table_entries, std::uint16_t, 244)             \
    W(vnic_entry_size, std::uint16_t, 246)                         \
    W(stat_entry_size, std::uint16_t, 248)                         \
    W(tqm_entry_size, std::uint16_t, 250)                          \
    W(mrav_entry_size, std::uint16_t, 252)                         \
    W(tim_entry_size, std::uint16_t, 254)                          \
    F(ring8_tqm_ring_lvl, std::uint8_t, 256, 0x0f, 0)              \
    F(ring8_tqm_ring_pg_size, std::uint8_t, 256, 0xf0, 4)          \
    W(tqm_ring8_num_entries, std::uint32_t, 260)                   \
    W(tqm_ring8_page_dir, std::uint64_t, 264)                      \
    W(qp_num_fast_qpmd_entries, std::uint16_t, 334)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_cfg_input, 336,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_CFG_INPUT);

#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_V2_INPUT(W, D, F, A) \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_BACKING_STORE_QCAPS_V2)      \
    W(type, std::uint16_t, 16)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_qcaps_v2_input, 24,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_V2_INPUT);

#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_V2_OUTPUT(W, D, F, A) \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(type, std::uint16_t, 8)                                      \
    W(entry_size, std::uint16_t, 10)                               \
    W(flags, std::uint32_t, 12)                                    \
    W(instance_bit_map, std::uint32_t, 16)                         \
    W(ctx_init_value, std::uint8_t, 20)                            \
    W(ctx_init_offset, std::uint8_t, 21)                           \
    W(entry_multiple, std::uint8_t, 22)                            \
    W(max_num_entries, std::uint32_t, 24)                          \
    W(min_num_entries, std::uint32_t, 28)                          \
    W(next_valid_type, std::uint16_t, 32)                          \
    W(subtype_valid_cnt, std::uint8_t, 34)                         \
    W(exact_cnt_bit_map, std::uint8_t, 35)                         \
    W(split_entry_0, std::uint32_t, 36)                            \
    W(split_entry_1, std::uint32_t, 40)                            \
    W(split_entry_2, std::uint32_t, 44)                            \
    W(split_entry_3, std::uint32_t, 48)                            \
    W(max_instance_count, std::uint16_t, 52)                       \
    RIG_BNXT_HWRM_VALID(W, 56)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_qcaps_v2_output, 56,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_QCAPS_V2_OUTPUT);

#define RIG_BNXT_HWRM_FUNC_BACKING_STORE_CFG_V2_INPUT(W, D, F, A)  \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_BACKING_STORE_CFG_V2)        \
    W(type, std::uint16_t, 16)                                     \
    W(instance, std::uint16_t, 18)                                 \
    W(flags, std::uint32_t, 20)                                    \
    W(page_dir, std::uint64_t, 24)                                 \
    W(num_entries, std::uint32_t, 32)                              \
    W(entry_size, std::uint16_t, 36)                               \
    F(pbl_level, std::uint8_t, 38, 0x0f, 0)                        \
    F(page_size, std::uint8_t, 38, 0xf0, 4)                        \
    W(subtype_valid_cnt, std::uint8_t, 39)                         \
    W(split_entry_0, std::uint32_t, 40)                            \
    W(split_entry_1, std::uint32_t, 44)                            \
    W(split_entry_2, std::uint32_t, 48)                            \
    W(split_entry_3, std::uint32_t, 52)                            \
    W(enables, std::uint32_t, 56)                                  \
    W(next_bs_offset, std::uint32_t, 60)
RIG_BNXT_LAYOUT(hwrm_func_backing_store_cfg_v2_input, 64,
                RIG_BNXT_HWRM_FUNC_BACKING_STORE_CFG_V2_INPUT);

// ---- rings (the CREQ and RoCE NQs are type NQ on P5/P7, qplib_rcfw.h RCFW_*), stat contexts -----

#define RIG_BNXT_HWRM_RING_ALLOC_INPUT(W, D, F, A)                 \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_RING_ALLOC)                       \
    W(enables, std::uint32_t, 16)                                  \
    W(ring_type, std::uint8_t, 20)                                 \
    W(cmpl_coal_cnt, std::uint8_t, 21)                             \
    W(flags, std::uint16_t, 22)                                    \
    W(page_tbl_addr, std::uint64_t, 24)                            \
    W(fbo, std::uint32_t, 32)                                      \
    W(page_size, std::uint8_t, 36)                                 \
    W(page_tbl_depth, std::uint8_t, 37)                            \
    W(schq_id, std::uint16_t, 38)                                  \
    W(length, std::uint32_t, 40)                                   \
    W(logical_id, std::uint16_t, 44)                               \
    W(cmpl_ring_id, std::uint16_t, 46)                             \
    W(queue_id, std::uint16_t, 48)                                 \
    W(rx_buf_size, std::uint16_t, 50)                              \
    W(rx_ring_id, std::uint16_t, 52)                               \
    W(nq_ring_id, std::uint16_t, 54)                               \
    W(stat_ctx_id, std::uint32_t, 64)                              \
    W(int_mode, std::uint8_t, 76)                                  \
    W(cq_handle, std::uint64_t, 80)
RIG_BNXT_LAYOUT(hwrm_ring_alloc_input, 88, RIG_BNXT_HWRM_RING_ALLOC_INPUT);

#define RIG_BNXT_HWRM_RING_ALLOC_OUTPUT(W, D, F, A)                \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(ring_id, std::uint16_t, 8)                                   \
    W(logical_ring_id, std::uint16_t, 10)                          \
    W(push_buffer_index, std::uint8_t, 12)                         \
    RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_ring_alloc_output, 16, RIG_BNXT_HWRM_RING_ALLOC_OUTPUT);

#define RIG_BNXT_HWRM_RING_FREE_INPUT(W, D, F, A)                  \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_RING_FREE)                        \
    W(ring_type, std::uint8_t, 16)                                 \
    W(flags, std::uint8_t, 17)                                     \
    W(ring_id, std::uint16_t, 18)                                  \
    W(prod_idx, std::uint32_t, 20)                                 \
    W(opaque, std::uint32_t, 24)
RIG_BNXT_LAYOUT(hwrm_ring_free_input, 32, RIG_BNXT_HWRM_RING_FREE_INPUT);

#define RIG_BNXT_HWRM_STAT_CTX_ALLOC_INPUT(W, D, F, A)             \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_STAT_CTX_ALLOC)                   \
    W(stats_dma_addr, std::uint64_t, 16)                           \
    W(update_period_ms, std::uint32_t, 24)                         \
    W(stat_ctx_flags, std::uint8_t, 28)                            \
    W(stats_dma_length, std::uint16_t, 30)                         \
    W(flags, std::uint16_t, 32)                                    \
    W(steering_tag, std::uint16_t, 34)                             \
    W(stat_ctx_id, std::uint32_t, 36)                              \
    W(alloc_seq_id, std::uint16_t, 40)
RIG_BNXT_LAYOUT(hwrm_stat_ctx_alloc_input, 48, RIG_BNXT_HWRM_STAT_CTX_ALLOC_INPUT);

#define RIG_BNXT_HWRM_STAT_CTX_ALLOC_OUTPUT(W, D, F, A)            \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(stat_ctx_id, std::uint32_t, 8)                               \
    RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_stat_ctx_alloc_output, 16, RIG_BNXT_HWRM_STAT_CTX_ALLOC_OUTPUT);

#define RIG_BNXT_HWRM_STAT_CTX_FREE_INPUT(W, D, F, A)              \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_STAT_CTX_FREE)                    \
    W(stat_ctx_id, std::uint32_t, 16)
RIG_BNXT_LAYOUT(hwrm_stat_ctx_free_input, 24, RIG_BNXT_HWRM_STAT_CTX_FREE_INPUT);

// ---- the L2 plumbing RoCE receive needs (docs/hardware.md): VNIC and the TRAFFIC_ROCE filter ----

#define RIG_BNXT_HWRM_VNIC_ALLOC_INPUT(W, D, F, A)                 \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_VNIC_ALLOC)                       \
    W(flags, std::uint32_t, 16)                                    \
    W(virtio_net_fid, std::uint16_t, 20)
RIG_BNXT_LAYOUT(hwrm_vnic_alloc_input, 24, RIG_BNXT_HWRM_VNIC_ALLOC_INPUT);

#define RIG_BNXT_HWRM_VNIC_ALLOC_OUTPUT(W, D, F, A)                \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(vnic_id, std::uint32_t, 8)                                   \
    RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_vnic_alloc_output, 16, RIG_BNXT_HWRM_VNIC_ALLOC_OUTPUT);

#define RIG_BNXT_HWRM_VNIC_CFG_INPUT(W, D, F, A)                   \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_VNIC_CFG)                         \
    W(flags, std::uint32_t, 16)                                    \
    W(enables, std::uint32_t, 20)                                  \
    W(vnic_id, std::uint16_t, 24)                                  \
    W(dflt_ring_grp, std::uint16_t, 26)                            \
    W(rss_rule, std::uint16_t, 28)                                 \
    W(cos_rule, std::uint16_t, 30)                                 \
    W(lb_rule, std::uint16_t, 32)                                  \
    W(mru, std::uint16_t, 34)                                      \
    W(default_rx_ring_id, std::uint16_t, 36)                       \
    W(default_cmpl_ring_id, std::uint16_t, 38)                     \
    W(queue_id, std::uint16_t, 40)
RIG_BNXT_LAYOUT(hwrm_vnic_cfg_input, 48, RIG_BNXT_HWRM_VNIC_CFG_INPUT);

#define RIG_BNXT_HWRM_CFA_L2_FILTER_ALLOC_INPUT(W, D, F, A)        \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_CFA_L2_FILTER_ALLOC)              \
    W(flags, std::uint32_t, 16)                                    \
    W(enables, std::uint32_t, 20)                                  \
    A(l2_addr, 24, 6)                                              \
    W(num_vlans, std::uint8_t, 30)                                 \
    A(l2_addr_mask, 32, 6)                                         \
    W(l2_ovlan, std::uint16_t, 38)                                 \
    W(l2_ovlan_mask, std::uint16_t, 40)                            \
    W(l2_ivlan, std::uint16_t, 42)                                 \
    W(l2_ivlan_mask, std::uint16_t, 44)                            \
    W(src_type, std::uint8_t, 70)                                  \
    W(src_id, std::uint32_t, 72)                                   \
    W(dst_id, std::uint16_t, 78)                                   \
    W(mirror_vnic_id, std::uint16_t, 80)                           \
    W(pri_hint, std::uint8_t, 82)                                  \
    W(l2_filter_id_hint, std::uint64_t, 88)
RIG_BNXT_LAYOUT(hwrm_cfa_l2_filter_alloc_input, 96, RIG_BNXT_HWRM_CFA_L2_FILTER_ALLOC_INPUT);

#define RIG_BNXT_HWRM_CFA_L2_FILTER_ALLOC_OUTPUT(W, D, F, A)       \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(l2_filter_id, std::uint64_t, 8)                              \
    F(flow_id_value, std::uint32_t, 16, 0x3fffffff, 0)             \
    RIG_BNXT_HWRM_VALID(W, 24)
RIG_BNXT_LAYOUT(hwrm_cfa_l2_filter_alloc_output, 24, RIG_BNXT_HWRM_CFA_L2_FILTER_ALLOC_OUTPUT);

// ---- the model's further bring-up requests (sim/bnxt): resource caps, frees, the PHY, events ---

#define RIG_BNXT_HWRM_FUNC_RESOURCE_QCAPS_INPUT(W, D, F, A)        \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FUNC_RESOURCE_QCAPS)              \
    D(fid, std::uint16_t, 16, 0xffff)
RIG_BNXT_LAYOUT(hwrm_func_resource_qcaps_input, 24, RIG_BNXT_HWRM_FUNC_RESOURCE_QCAPS_INPUT);

// What FUNC_CFG may reserve (the "new resource manager": bnxt_en uses FUNC_CFG reservations
// when this request succeeds, bnxt.c bnxt_hwrm_func_resc_qcaps).
#define RIG_BNXT_HWRM_FUNC_RESOURCE_QCAPS_OUTPUT(W, D, F, A)       \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(max_vfs, std::uint16_t, 8)                                   \
    W(max_msix, std::uint16_t, 10)                                 \
    W(vf_reservation_strategy, std::uint16_t, 12)                  \
    W(min_rsscos_ctx, std::uint16_t, 14)                           \
    W(max_rsscos_ctx, std::uint16_t, 16)                           \
    W(min_cmpl_rings, std::uint16_t, 18)                           \
    W(max_cmpl_rings, std::uint16_t, 20)                           \
    W(min_tx_rings, std::uint16_t, 22)                             \
    W(max_tx_rings, std::uint16_t, 24)                             \
    W(min_rx_rings, std::uint16_t, 26)                             \
    W(max_rx_rings, std::uint16_t, 28)                             \
    W(min_l2_ctxs, std::uint16_t, 30)                              \
    W(max_l2_ctxs, std::uint16_t, 32)                              \
    W(min_vnics, std::uint16_t, 34)                                \
    W(max_vnics, std::uint16_t, 36)                                \
    W(min_stat_ctx, std::uint16_t, 38)                             \
    W(max_stat_ctx, std::uint16_t, 40)                             \
    W(min_hw_ring_grps, std::uint16_t, 42)                         \
    W(max_hw_ring_grps, std::uint16_t, 44)                         \
    W(max_tx_scheduler_inputs, std::uint16_t, 46)                  \
    W(flags, std::uint16_t, 48)                                    \
    W(min_msix, std::uint16_t, 50)                                 \
    RIG_BNXT_HWRM_VALID(W, 88)
RIG_BNXT_LAYOUT(hwrm_func_resource_qcaps_output, 88, RIG_BNXT_HWRM_FUNC_RESOURCE_QCAPS_OUTPUT);

#define RIG_BNXT_HWRM_VNIC_FREE_INPUT(W, D, F, A)                  \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_VNIC_FREE)                        \
    W(vnic_id, std::uint32_t, 16)
RIG_BNXT_LAYOUT(hwrm_vnic_free_input, 24, RIG_BNXT_HWRM_VNIC_FREE_INPUT);

#define RIG_BNXT_HWRM_CFA_L2_FILTER_FREE_INPUT(W, D, F, A)         \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_CFA_L2_FILTER_FREE)               \
    W(l2_filter_id, std::uint64_t, 16)
RIG_BNXT_LAYOUT(hwrm_cfa_l2_filter_free_input, 24, RIG_BNXT_HWRM_CFA_L2_FILTER_FREE_INPUT);

#define RIG_BNXT_HWRM_PORT_PHY_QCFG_INPUT(W, D, F, A)              \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_PORT_PHY_QCFG)                    \
    W(port_id, std::uint16_t, 16)
RIG_BNXT_LAYOUT(hwrm_port_phy_qcfg_input, 24, RIG_BNXT_HWRM_PORT_PHY_QCFG_INPUT);

// The link as bnxt_en reads it (bnxt.c bnxt_update_link): link, link_speed in 100 Mb/s units
// (PORT_PHY_QCFG_RESP_LINK_SPEED_*), duplex, the speeds supported, the PHY and its media.
#define RIG_BNXT_HWRM_PORT_PHY_QCFG_OUTPUT(W, D, F, A)             \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(link, std::uint8_t, 8)                                       \
    W(active_fec_signal_mode, std::uint8_t, 9)                     \
    W(link_speed, std::uint16_t, 10)                               \
    W(duplex_cfg, std::uint8_t, 12)                                \
    W(pause, std::uint8_t, 13)                                     \
    W(support_speeds, std::uint16_t, 14)                           \
    W(force_link_speed, std::uint16_t, 16)                         \
    W(auto_mode, std::uint8_t, 18)                                 \
    W(auto_pause, std::uint8_t, 19)                                \
    W(auto_link_speed, std::uint16_t, 20)                          \
    W(auto_link_speed_mask, std::uint16_t, 22)                     \
    W(phy_type, std::uint8_t, 35)                                  \
    W(media_type, std::uint8_t, 36)                                \
    W(duplex_state, std::uint8_t, 54)                              \
    W(option_flags, std::uint8_t, 55)                              \
    W(support_pam4_speeds, std::uint16_t, 88)                      \
    W(support_speeds2, std::uint16_t, 96)                          \
    W(active_lanes, std::uint8_t, 102)                             \
    RIG_BNXT_HWRM_VALID(W, 104)
RIG_BNXT_LAYOUT(hwrm_port_phy_qcfg_output, 104, RIG_BNXT_HWRM_PORT_PHY_QCFG_OUTPUT);

// PORT_PHY_QCAPS: what the PHY can do (bnxt.c bnxt_hwrm_phy_qcaps: flags, port_cnt, the speed
// masks; no speed at all means "Ethernet link disabled").
#define RIG_BNXT_HWRM_PORT_PHY_QCAPS_INPUT(W, D, F, A)             \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_PORT_PHY_QCAPS)                   \
    W(port_id, std::uint16_t, 16)
RIG_BNXT_LAYOUT(hwrm_port_phy_qcaps_input, 24, RIG_BNXT_HWRM_PORT_PHY_QCAPS_INPUT);

#define RIG_BNXT_HWRM_PORT_PHY_QCAPS_OUTPUT(W, D, F, A)            \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(flags, std::uint8_t, 8)                                      \
    W(port_cnt, std::uint8_t, 9)                                   \
    W(supported_speeds_force_mode, std::uint16_t, 10)              \
    W(supported_speeds_auto_mode, std::uint16_t, 12)               \
    W(supported_speeds_eee_mode, std::uint16_t, 14)                \
    W(tx_lpi_timer_low, std::uint32_t, 16)                         \
    W(valid_tx_lpi_timer_high, std::uint32_t, 20)                  \
    W(supported_pam4_speeds_auto_mode, std::uint16_t, 24)          \
    W(supported_pam4_speeds_force_mode, std::uint16_t, 26)         \
    W(flags2, std::uint16_t, 28)                                   \
    W(internal_port_cnt, std::uint8_t, 30)                         \
    W(supported_speeds2_force_mode, std::uint16_t, 32)             \
    W(supported_speeds2_auto_mode, std::uint16_t, 34)              \
    RIG_BNXT_HWRM_VALID(W, 40)
RIG_BNXT_LAYOUT(hwrm_port_phy_qcaps_output, 40, RIG_BNXT_HWRM_PORT_PHY_QCAPS_OUTPUT);

// QUEUE_QPORTCFG: the port's CoS queues as bnxt_en reads them (bnxt.c bnxt_hwrm_queue_qportcfg:
// max_configurable_queues, then queue_idN / queue_idN_service_profile pairs).
#define RIG_BNXT_HWRM_QUEUE_QPORTCFG_INPUT(W, D, F, A)             \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_QUEUE_QPORTCFG)                   \
    W(flags, std::uint32_t, 16)                                    \
    W(port_id, std::uint16_t, 20)                                  \
    W(drv_qmap_cap, std::uint8_t, 22)
RIG_BNXT_LAYOUT(hwrm_queue_qportcfg_input, 24, RIG_BNXT_HWRM_QUEUE_QPORTCFG_INPUT);

#define RIG_BNXT_QPORTCFG_QUEUE(W, n, off)                          \
    W(queue_id##n, std::uint8_t, off)                              \
    W(queue_id##n##_service_profile, std::uint8_t, off + 1)
#define RIG_BNXT_HWRM_QUEUE_QPORTCFG_OUTPUT(W, D, F, A)            \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(max_configurable_queues, std::uint8_t, 8)                    \
    W(max_configurable_lossless_queues, std::uint8_t, 9)           \
    W(queue_cfg_allowed, std::uint8_t, 10)                         \
    W(queue_cfg_info, std::uint8_t, 11)                            \
    W(queue_pfcenable_cfg_allowed, std::uint8_t, 12)               \
    W(queue_pri2cos_cfg_allowed, std::uint8_t, 13)                 \
    W(queue_cos2bw_cfg_allowed, std::uint8_t, 14)                  \
    RIG_BNXT_QPORTCFG_QUEUE(W, 0, 15)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 1, 17)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 2, 19)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 3, 21)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 4, 23)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 5, 25)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 6, 27)                              \
    RIG_BNXT_QPORTCFG_QUEUE(W, 7, 29)                              \
    W(queue_id0_service_profile_type, std::uint8_t, 31)            \
    A(qid0_name, 32, 16)                                           \
    RIG_BNXT_HWRM_VALID(W, 168)
RIG_BNXT_LAYOUT(hwrm_queue_qportcfg_output, 168, RIG_BNXT_HWRM_QUEUE_QPORTCFG_OUTPUT);

// FW_SET_TIME: the host's wall-clock time (bnxt.c bnxt_hwrm_fw_set_time), UTC, zone 0.
#define RIG_BNXT_HWRM_FW_SET_TIME_INPUT(W, D, F, A)                \
    RIG_BNXT_HWRM_REQ(W, D, HWRM_FW_SET_TIME)                      \
    W(year, std::uint16_t, 16)                                     \
    W(month, std::uint8_t, 18)                                     \
    W(day, std::uint8_t, 19)                                       \
    W(hour, std::uint8_t, 20)                                      \
    W(minute, std::uint8_t, 21)                                    \
    W(second, std::uint8_t, 22)                                    \
    W(millisecond, std::uint16_t, 24)                              \
    W(zone, std::uint16_t, 26)
RIG_BNXT_LAYOUT(hwrm_fw_set_time_input, 32, RIG_BNXT_HWRM_FW_SET_TIME_INPUT);

// An asynchronous event on a completion ring (type HWRM_ASYNC_EVENT 0x2e): v is the ring's
// phase bit, as in every completion.
#define RIG_BNXT_HWRM_ASYNC_EVENT_CMPL(W, D, F, A)                 \
    F(type, std::uint16_t, 0, 0x3f, 0)                             \
    W(event_id, std::uint16_t, 2)                                  \
    W(event_data2, std::uint32_t, 4)                               \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    F(opaque, std::uint8_t, 8, 0xfe, 1)                            \
    W(timestamp_lo, std::uint8_t, 9)                               \
    W(timestamp_hi, std::uint16_t, 10)                             \
    W(event_data1, std::uint32_t, 12)
RIG_BNXT_LAYOUT(hwrm_async_event_cmpl, 16, RIG_BNXT_HWRM_ASYNC_EVENT_CMPL);
// RESET_NOTIFY's own struct in bnxt_hsi.h (hwrm_async_event_cmpl_reset_notify): the same
// fields, pinned on their own so a change to either struct is seen.
RIG_BNXT_LAYOUT(hwrm_async_event_cmpl_reset_notify, 16, RIG_BNXT_HWRM_ASYNC_EVENT_CMPL);

inline constexpr std::uint8_t PORT_PHY_QCFG_RESP_LINK_NO_LINK = 0x0;
inline constexpr std::uint8_t PORT_PHY_QCFG_RESP_LINK_LINK = 0x2;
inline constexpr std::uint16_t PORT_PHY_QCFG_RESP_LINK_SPEED_100GB = 0x3e8;
inline constexpr std::uint16_t PORT_PHY_QCFG_RESP_LINK_SPEED_200GB = 0x7d0;
inline constexpr std::uint16_t PORT_PHY_QCFG_RESP_SUPPORT_SPEEDS_100GB = 0x800;
inline constexpr std::uint8_t PORT_PHY_QCFG_RESP_DUPLEX_STATE_FULL = 0x1;
inline constexpr std::uint16_t ASYNC_EVENT_CMPL_TYPE_HWRM_ASYNC_EVENT = 0x2e;
inline constexpr std::uint16_t ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE = 0x0;
inline constexpr std::uint16_t ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY = 0x8;
inline constexpr std::uint16_t ASYNC_EVENT_CMPL_EVENT_ID_ERROR_RECOVERY = 0x9;
// LINK_STATUS_CHANGE event_data1 bit 0: the link is up (bnxt.c bnxt_async_event_process).
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_LINK_STATUS_CHANGE_EVENT_DATA1_LINK_CHANGE_UP = 0x1;
// RESET_NOTIFY (hwrm_async_event_cmpl_reset_notify, the same 16 bytes): event_data1 carries the
// driver's action (bits 0-7), the reason (bits 8-15) and a delay in 100 ms ticks (bits 16-31);
// event_data2 bits 0-15 the firmware's status code; timestamp_lo / timestamp_hi are the minimum
// and maximum wait in deciseconds before the firmware answers again (bnxt.c: fw_reset_min_dsecs,
// fw_reset_max_dsecs).
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_MASK = 0xff;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_STOP_TX_QUEUE = 0x1;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_IFDOWN = 0x2;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_MASK = 0xff00;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_SFT = 8;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_MANAGEMENT_RESET_REQUEST = 0x100;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_FW_EXCEPTION_FATAL = 0x200;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_FW_EXCEPTION_NON_FATAL = 0x300;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_FAST_RESET = 0x400;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_FW_ACTIVATION = 0x500;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DELAY_IN_100MS_TICKS_MASK = 0xffff0000;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DELAY_IN_100MS_TICKS_SFT = 16;
inline constexpr std::uint32_t ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA2_FW_STATUS_CODE_MASK = 0xffff;

// The name of a RESET_NOTIFY reason (event_data1 bits 8-15): "FW_EXCEPTION_FATAL".
constexpr const char* reset_notify_reason_name(std::uint32_t data1) noexcept {
    switch ((data1 & ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_MASK) >>
            ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_SFT) {
    case 1: return "MANAGEMENT_RESET_REQUEST";
    case 2: return "FW_EXCEPTION_FATAL";
    case 3: return "FW_EXCEPTION_NON_FATAL";
    case 4: return "FAST_RESET";
    case 5: return "FW_ACTIVATION";
    default: return "UNKNOWN";
    }
}
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR = 0x4000;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_CACHE_LINESIZE = 0x100000;
inline constexpr std::uint8_t FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_MASK = 0x3;
inline constexpr std::uint8_t FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_SIZE_128 = 0x1;
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_RX_AGG = 0x4;
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_MASK = 0x30;
inline constexpr std::uint32_t QUEUE_QPORTCFG_REQ_FLAGS_PATH_RX = 0x1;
inline constexpr std::uint8_t QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY = 0x0;
inline constexpr std::uint8_t QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSLESS_ROCE = 0x1;
inline constexpr std::uint8_t QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY_ROCE_CNP = 0x2;
inline constexpr std::uint16_t FW_SET_TIME_REQ_ZONE_UTC = 0x0;
inline constexpr std::uint8_t PORT_PHY_QCAPS_RESP_PORT_CNT_1 = 0x1;
inline constexpr std::uint16_t PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_AUTO_MODE_100GB = 0x800;
inline constexpr std::uint16_t PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_FORCE_MODE_100GB = 0x800;

}  // namespace rig::bnxt::abi
