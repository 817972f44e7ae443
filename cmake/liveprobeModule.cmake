# liveprobe_add_module(NAME SOURCE...): a probe module NAME.so built from kernel-style source,
# as `liveprobe build-module` builds one (API.md section 2): liveprobe's compatibility headers
# first on the include path (<linux/module.h>, ...), position-independent, linked to liveprobe.
# Used by liveprobe's own build (samples/, tests/modules/) and installed with its CMake package:
#   find_package(liveprobe REQUIRED)
#   liveprobe_add_module(mymodule mymodule.c)
# LIVEPROBE_COMPAT_DIR is set by whoever includes this file.
function(liveprobe_add_module name)
  add_library(${name} MODULE ${ARGN})
  set_target_properties(${name} PROPERTIES PREFIX "" SUFFIX ".so")
  target_include_directories(${name} BEFORE PRIVATE ${LIVEPROBE_COMPAT_DIR})
  target_link_libraries(${name} PRIVATE liveprobe::liveprobe)
endfunction()
