// How the tool reaches the files of a process whose root is not the tool's: a container (a
// mount namespace of its own, pivot_root) or a chroot (docs/DESIGN-NOTES.md, "Containers").
//
// /proc/PID/maps names a mapped file by its path from the root of the process's mount
// namespace, seen from the reader: a container's "/usr/lib/.../libc.so.6" is the tool's
// "/proc/PID/root/usr/lib/.../libc.so.6", but a process chrooted inside its namespace shows
// "/srv/root/usr/lib/..." while its root is /srv/root. Neither the tool's view of a path nor
// /proc/PID/root followed by it is then the file: a file is taken for the process's only when
// its device and inode are those of the mapping.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace liveprobe::tool {

// The path through which the tool opens the file the process has mapped at `path` (a path of
// /proc/PID/maps, "... (deleted)" included): the first of these whose device and inode are the
// mapping's:
//   1. /proc/PID/root followed by the path, then by each shorter tail of it ("/srv/root/usr/x",
//      "/root/usr/x", "/usr/x": a chroot inside the namespace);
//   2. the path as the tool sees it (a chroot in the tool's own namespace);
//   3. /proc/PID/map_files/START-END (a file deleted or replaced since; needs CAP_SYS_ADMIN or
//      CAP_CHECKPOINT_RESTORE);
//   4. a descriptor of the process open on it, /proc/PID/fd/N (a memfd: the agent loaded into
//      a container keeps its memfd open, see injector.hpp).
// When none matches (no such mapping), /proc/PID/root followed by the path.
std::string path_in(pid_t pid, const std::string &path);

// Whether `host_path` (a path of the tool's) names the same file in the root of process pid.
bool same_file_in_root(pid_t pid, const std::string &host_path);

// Whether /proc/self resolves for process pid in its root: a proc file system is mounted at
// /proc there, of a pid namespace the process is in (a proc of another one has no "self" for it).
bool root_has_proc(pid_t pid);

// The shared libraries that `library` (a path of the tool's) needs, directly or through one
// another (DT_NEEDED, without the dynamic loader itself), that the root of process pid lacks in
// the loader's directories (the multiarch and lib64 ones, /usr/local/lib, and those its
// /etc/ld.so.conf.d names), in the order found. Where a library is missing, its own needs are
// taken from the tool's copy, so that every missing one is named.
std::vector<std::string> missing_in_root(pid_t pid, const std::string &library);

}  // namespace liveprobe::tool
