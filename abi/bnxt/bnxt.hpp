#pragma once
// Everything of abi/bnxt: Broadcom NetXtreme-E P5/P7 ("Thor", "Thor2") formats, pinned to the
// kernel's bnxt_hsi.h and roce_hsi.h by test/unit/bnxt.
#include "abi/bnxt/cqe.hpp"        // 32-byte CQEs, toggle bit, status tables, NQ entries
#include "abi/bnxt/doorbell.hpp"   // the 64-bit dbc_dbc doorbell
#include "abi/bnxt/hwrm.hpp"       // HWRM headers, short input, bring-up requests (hwrm_cmds.hpp)
#include "abi/bnxt/ids.hpp"        // PCI vendor and device ids
#include "abi/bnxt/layout.hpp"     // the layout language: encode/decode/validate
#include "abi/bnxt/rcfw.hpp"       // CMDQ/CREQ, RoCE commands (rcfw_cmds.hpp)
#include "abi/bnxt/wqe.hpp"        // SQ/RQ entries, SGEs, PSN/MSN search entries
