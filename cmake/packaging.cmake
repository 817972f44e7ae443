# The Debian packages of `make deb` (docs/packaging.md): CPack's DEB generator, one package per
# install component, from the build as it is (no second build).
#   liveprobe          component runtime: the tool, libliveprobe.so.0, libliveprobe-start.so,
#                      and whatever else is installed without a component (man pages,
#                      completion): CMAKE_INSTALL_DEFAULT_COMPONENT_NAME is runtime.
#   liveprobe-dev      component dev: headers, the libliveprobe.so link, liveprobe.pc, the CMake
#                      package. Depends on liveprobe of the same version.
#   liveprobe-dbgsym   the debug information CPack splits off the runtime's ELF files, under
#                      /usr/lib/debug/.build-id/ where gdb, eu-stack and liveprobe itself look.
# The runtime's files are stripped in the package only (objcopy --strip-unneeded): the build's
# own stay whole for the tests and for gdb.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME liveprobe)
set(CPACK_PACKAGE_VENDOR liveprobe)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# CPackDeb puts this summary before each component's description unless it is CPack's default
# one: left at that default, each package's synopsis is its own description's first line.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_NAME} built using CMake")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR}/deb)
set(LIVEPROBE_DEB_MAINTAINER "liveprobe maintainers <maintainers@users.noreply.a-seed-12b685fa.example>"
  CACHE STRING "The Maintainer field of the Debian packages (make deb)")
set(CPACK_PACKAGE_CONTACT "${LIVEPROBE_DEB_MAINTAINER}")

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Depends: computed by dpkg-shlibdeps from the ELF files' needs (libc6, libelf1, libdw1,
# libfmt9, libzydis4, libunwind8, libstdc++6, ...), as Debian's own packages are.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME liveprobe)
set(CPACK_DEBIAN_RUNTIME_DEBUGINFO_PACKAGE ON)
# The shlibs file: a package linking libliveprobe.so.0 gets "Depends: liveprobe (>= VERSION)"
# (only the runtime component has shared libraries).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# ldconfig runs through dpkg's trigger (CPack's own postinst and postrm call it as well).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/deb/triggers)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "kprobes for user-space processes
liveprobe puts probes on any instruction of a running program, as Linux's
kprobes do in the kernel. The liveprobe command traces calls, counts and
times them, and loads probe modules into running programs;
libliveprobe.so.0 is the engine, linked into a program or loaded into a
running one.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME liveprobe-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "liveprobe (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE amd64)  # the .so link points into liveprobe's amd64 library
set(CPACK_DEBIAN_DEV_DESCRIPTION "kprobes for user-space processes (development files)
The C and C++ headers of liveprobe's API and of its probe modules, the
libliveprobe.so link, liveprobe.pc for pkg-config and the CMake package
(find_package(liveprobe)).")

include(CPack)
