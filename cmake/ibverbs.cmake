# rdma-core's libibverbs for the ibverbs backend (transport/ibverbs/). Sets TUTTI_WITH_IBVERBS and,
# when on, the imported target tutti::ibverbs. pkg-config first (libibverbs-dev ships
# libibverbs.pc), then a plain search for the header and the library.
set(TUTTI_WITH_IBVERBS OFF)
if(NOT TUTTI_IBVERBS STREQUAL "OFF")
  pkg_check_modules(IBVERBS QUIET IMPORTED_TARGET libibverbs)
  if(IBVERBS_FOUND)
    add_library(tutti::ibverbs ALIAS PkgConfig::IBVERBS)
    set(TUTTI_WITH_IBVERBS ON)
  else()
    find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
    find_library(IBVERBS_LIBRARY ibverbs)
    if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
      add_library(tutti_ibverbs_found INTERFACE IMPORTED)
      set_target_properties(tutti_ibverbs_found PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES ${IBVERBS_INCLUDE_DIR}
        INTERFACE_LINK_LIBRARIES ${IBVERBS_LIBRARY})
      add_library(tutti::ibverbs ALIAS tutti_ibverbs_found)
      set(TUTTI_WITH_IBVERBS ON)
    endif()
  endif()
  if(TUTTI_WITH_IBVERBS)
    message(STATUS "tutti: building the ibverbs backend (libibverbs ${IBVERBS_VERSION}${IBVERBS_LIBRARY})")
  elseif(TUTTI_IBVERBS STREQUAL "ON")
    message(FATAL_ERROR "TUTTI_IBVERBS=ON but libibverbs was not found (install libibverbs-dev)")
  else()
    message(STATUS "tutti: no libibverbs found: the ibverbs backend refuses every use (TUTTI_IBVERBS=AUTO)")
  endif()
endif()
