// Probe modules in this process: loading (`insmod`), unloading (`rmmod`) and listing (`lsmod`),
// as the agent serves them (API.md section 2).
//
// A module is a shared object built against <liveprobe/module.h> (its marker symbol
// liveprobe_module_abi_1 says so, read from the file before anything of it is loaded). Loading:
// dlopen (its constructors declare its parameters and its MODULE_* information), each
// `name=value` checked against the declarations and set, then its init (module_init, or its own
// init_module(): looked up in the module itself, never in libc, which exports one too). An
// error at any step, or an init that returns non-zero, unloads it and reports why; nothing of it
// stays. Unloading: its exit, then the probes it left registered (unregistered, with a warning in
// the log), then a wait until no thread executes its code, then dlclose.
//
// Calls are serialized by one mutex: one load or unload at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace liveprobe::agent {

// Loads the module at `path` with its `name=value` arguments. 0 and *name (the module's name:
// its file name without ".so"), or a negative errno with *why: -ENOENT (no file), -ENOEXEC (not
// a probe module, or dlopen refused it), -EEXIST (a module of that name is loaded), -EINVAL (an
// argument: unknown name, no '=', bad value), or the init's own error.
int load_module(const std::string &path, const std::vector<std::string> &args, std::string *name, std::string *why);

// Unloads module `name`: 0, or -ENOENT (not loaded), -EBUSY (it has an init but no exit, or a
// thread stayed inside its code), with *why. On success *why is a warning, or empty (its exit
// faulted: abandoned, and the module unloaded all the same).
int unload_module(const std::string &name, std::string *why);

// lsmod: one line per module ("NAME SIZE PROBES PATH") followed by its probes, one line each
// ("  ADDRESS KIND SYMBOL+OFFSET hits=N nmissed=N [FLAGS]"), then the probes that belong to no
// module, under "(program)".
std::vector<std::string> list_modules();

// How many modules are loaded (for `status`).
size_t module_count();
// Their names, in the order they were loaded (for `detach`).
std::vector<std::string> module_names();

}  // namespace liveprobe::agent
