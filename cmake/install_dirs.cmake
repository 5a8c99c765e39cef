# Where `cmake --install` puts things, relative to the prefix: GNUInstallDirs' directories and
# tutti's own. Shared by cmake/install.cmake and tests/install/ (which is configured before it).
include(GNUInstallDirs)

set(TUTTI_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tutti CACHE STRING
    "Where tuttiConfig.cmake goes (relative to the prefix)")
set(TUTTI_INSTALL_PYTHONDIR lib/python3/dist-packages CACHE STRING
    "Site directory for the Python package 'tutti' (relative to the prefix). The default is \
Debian's for the prefix /usr; for /usr/local pass e.g. lib/python3.11/dist-packages")
set(TUTTI_INSTALL_SYSTEMDUNITDIR lib/systemd/system CACHE STRING
    "Where tuttid.service goes (relative to the prefix)")
