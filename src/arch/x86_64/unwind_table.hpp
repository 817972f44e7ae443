// The table stack_walk.hpp's walks read: the call frame information of every object loaded in
// this process, as x86-64 rows (where the CFA is, where rbp was saved), from their .eh_frame
// (symbols/cfi_rows.hpp), for the FDEs their .eh_frame_hdr lists. Built when a trace first
// wants stacks, and again when objects were loaded since; each table replaced is kept (a walk
// may still read it), one per change of the loaded objects.
#pragma once

#include <cstddef>

namespace liveprobe::arch {

// Builds and publishes the table of the objects loaded now, unless they are those of the
// table published (dl_iterate_phdr's count of loads and unloads). Not on the hit path: reads
// files, allocates. Thread-safe (a mutex). Returns the rows it holds.
size_t build_unwind_table();

}  // namespace liveprobe::arch
