/* What --hist's return handler in assembly (trace/hist_return.S) reads, checked against the C++
 * types in trace/handlers.cpp. The instance's layout is light_layout.h's (EntryData::entry_ns,
 * the stamp, at LP_RI_DATA). */
#pragma once

#define LP_ROWS_GENERATION 0x08  /* ThreadRows::generation */
#define LP_ROWS_HISTS 0x10       /* ThreadRows::hists */
#define LP_ROWS_PENDING 0x28     /* ThreadRows::pending */
#define LP_SLOT_GENERATION 0x10  /* Slot::generation (g_slots[0]'s: slot 0's session) */
#define LP_HIST_BUCKETS 40       /* kHistBuckets */
#define LP_PROBE_INDEX_FROM_RP (-0x80)  /* Probe::index, from its rp */
#define LP_HIST_ROW_BYTES (LP_HIST_BUCKETS * 8)  /* one probe's row */
#define LP_HIST_LAST (LP_HIST_BUCKETS - 1)
#define LP_CONV_SIZE_LOG2 7      /* sizeof(os::clock::Conversion) is 128 */
#define LP_CONV_MULT 0x10        /* Conversion::mult */
#define LP_CONV_RING_MASK 7      /* os::clock::kRing - 1 */
