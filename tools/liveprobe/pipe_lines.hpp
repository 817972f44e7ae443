// Whole lines into a pipe that others write to too: a traced program's own output, with
// `2>&1 | grep`, `| less`. The kernel keeps one write to a pipe whole up to PIPE_BUF (4096)
// bytes only; a larger one may have another writer's bytes in its middle, and so may theirs.
// The tool's lines then came torn, and the program's too.
#pragma once

#include <cstdio>

namespace liveprobe::tool {

// A stream over descriptor fd whose writes go out in pieces of at most PIPE_BUF bytes, each
// ending at a line's end (a longer line in PIPE_BUF pieces): buffered as stdio buffers it, each
// piece one write. nullptr when the stream cannot be made.
FILE *open_pipe_lines(int fd);

}  // namespace liveprobe::tool
