#pragma once
/// @file
/// Rig's whole API in one include (the Boost.Asio adapter aside: rig/asio.hpp and
/// rig/asio_events.hpp, which need Boost's headers). Link with `pkg-config --libs rig`.
/// docs/guide.md walks through it by task.
#include "rig/config.hpp"
#include "rig/completion.hpp"
#include "rig/endpoint.hpp"
#include "rig/error.hpp"
#include "rig/group.hpp"
#include "rig/info.hpp"
#include "rig/log.hpp"
#include "rig/nic.hpp"
#include "rig/open_options.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

/// Everything the library offers: rig::nic (open, regions, queue pairs, groups, close),
/// rig::region, rig::queue_pair, rig::completion_group, and their options, results and errors.
namespace rig {}
