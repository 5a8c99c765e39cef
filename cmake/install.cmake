# `cmake --install <build> [--prefix P]`: libtutti.so with its SONAME links, tutti.h, a CMake
# package (find_package(tutti 0.2) -> tutti::tutti), tutti.pc, tuttid and tuttirun, the Python
# package, the Grafana dashboard, and the systemd unit and example configuration when packaging/
# has them.
# Included at the end of the top-level CMakeLists.txt, after every target exists. docs/install.md.
include(${CMAKE_CURRENT_LIST_DIR}/install_dirs.cmake)
include(CMakePackageConfigHelpers)

# ---- libtutti.so: libtutti.so.0.Y.Z, libtutti.so.0 (SONAME) and the libtutti.so link ---------
# tutti links its static libraries (tutti_client, ...) PRIVATE: they are inside the .so, and
# for a shared library CMake exports no private dependency, so the export set needs only tutti.
# Its BUILD_INTERFACE include becomes <prefix>/include through INCLUDES DESTINATION.
install(TARGETS tutti EXPORT tuttiTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/capi/include/tutti/tutti.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tutti)
# The GPU module (docs/gpu.md) goes next to libtutti.so, where its loader looks first. Its RPATH
# names the CUDA and NCCL directories of the build machine.
if(TARGET tutti_cuda)
  install(TARGETS tutti_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# MPI mode, where an MPI was found: the library and its header (docs/launchers.md). It finds
# tuttid in ../bin from itself.
if(TARGET tutti_mpi)
  install(TARGETS tutti_mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/capi/include/tutti/tutti_mpi.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tutti)
endif()

# ---- CMake package ----------------------------------------------------------------------------
install(EXPORT tuttiTargets NAMESPACE tutti:: FILE tuttiTargets.cmake
        DESTINATION ${TUTTI_INSTALL_CMAKEDIR})
set(_tutti_package_dir ${CMAKE_CURRENT_BINARY_DIR}/cmake-package)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tuttiConfig.cmake.in
                              ${_tutti_package_dir}/tuttiConfig.cmake
                              INSTALL_DESTINATION ${TUTTI_INSTALL_CMAKEDIR})
# docs/abi-policy.md: libtutti.so.0 runs programs built against any older 0.x header, and refuses
# a newer minor. So 0.y satisfies a request for 0.x when y >= x: SameMajorVersion, 0.x included.
write_basic_package_version_file(${_tutti_package_dir}/tuttiConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${_tutti_package_dir}/tuttiConfig.cmake ${_tutti_package_dir}/tuttiConfigVersion.cmake
        DESTINATION ${TUTTI_INSTALL_CMAKEDIR})

# ---- programs ---------------------------------------------------------------------------------
# Neither links libtutti.so (both use the static tutti_server) and they need no RPATH: CMake
# drops the build-tree RPATH when installing.
install(TARGETS tuttid tuttirun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The Grafana dashboard for tuttid's series (docs/operations.md, "Grafana"): a file to import.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/grafana/tutti-dashboard.json
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tutti/grafana)

# ---- Python package ---------------------------------------------------------------------------
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/tutti DESTINATION ${TUTTI_INSTALL_PYTHONDIR}
        PATTERN __pycache__ EXCLUDE
        PATTERN "*.pyc" EXCLUDE
        PATTERN "libtutti.so*" EXCLUDE
        PATTERN "_install_paths.py" EXCLUDE)

# ---- files that name install paths: written at install time -----------------------------------
# tutti.pc, tutti/_install_paths.py (where the Python package finds libtutti.so.0) and
# tuttid.service name absolute directories, and `cmake --install --prefix P` changes the prefix
# only at install time; so they are written then, by a script configured here with the relative
# directories. The systemd unit and example configuration are looked for then too, so a unit
# added to packaging/ after configuring is still installed.
configure_file(${CMAKE_CURRENT_LIST_DIR}/install_time.cmake.in
               ${_tutti_package_dir}/install_time.cmake @ONLY)
install(SCRIPT ${_tutti_package_dir}/install_time.cmake)
