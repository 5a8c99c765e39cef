# The GPU module, libtutti_cuda.so (docs/gpu.md). Sets TUTTI_WITH_GPU and defines
# tutti_add_gpu_module(), called once the targets it links exist.
include(GNUInstallDirs)
include(CheckLanguage)

set(TUTTI_WITH_GPU OFF)
if(NOT TUTTI_GPU STREQUAL "OFF")
  # Hopper as machine code plus PTX that newer GPUs compile at load time.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
                 /usr/local/cuda/lib /usr/local/cuda/lib64)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(TUTTI_WITH_GPU ON)
    message(STATUS "tutti: building the GPU module (CUDA ${CUDAToolkit_VERSION}, NCCL ${NCCL_LIBRARY}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(TUTTI_GPU STREQUAL "ON")
    message(FATAL_ERROR "TUTTI_GPU=ON but the CUDA toolkit or NCCL was not found "
                        "(nvcc: '${CMAKE_CUDA_COMPILER}', nccl.h: '${NCCL_INCLUDE_DIR}', "
                        "libnccl: '${NCCL_LIBRARY}')")
  else()
    message(STATUS "tutti: no CUDA toolkit with NCCL found: CPU-only build (TUTTI_GPU=AUTO)")
  endif()
endif()

function(tutti_add_gpu_module)
  # The batched copy kernel, compiled once for the module, its tests and its benchmark.
  add_library(tutti_copy_kernels OBJECT gpu/copy_kernels.cu)
  set_target_properties(tutti_copy_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
    CUDA_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  target_include_directories(tutti_copy_kernels PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(tutti_copy_kernels PUBLIC tutti_common CUDA::cudart)

  add_library(tutti_cuda MODULE
    gpu/cuda_module.cc
    gpu/process_set_on_device.cc)
  set_target_properties(tutti_cuda PROPERTIES
    PREFIX "lib" OUTPUT_NAME tutti_cuda
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
    CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    CUDA_RUNTIME_LIBRARY Shared
    # Found at run time where this build found them; elsewhere through LD_LIBRARY_PATH.
    INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}"
    BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}"
    LINK_DEPENDS ${CMAKE_SOURCE_DIR}/gpu/module.map)
  get_filename_component(nccl_dir ${NCCL_LIBRARY} DIRECTORY)
  set_property(TARGET tutti_cuda APPEND PROPERTY BUILD_RPATH ${nccl_dir})
  set_property(TARGET tutti_cuda APPEND PROPERTY INSTALL_RPATH ${nccl_dir})
  target_include_directories(tutti_cuda PRIVATE ${CMAKE_SOURCE_DIR} ${NCCL_INCLUDE_DIR})
  target_link_libraries(tutti_cuda PRIVATE tutti_copy_kernels tutti_common CUDA::cudart ${NCCL_LIBRARY})
  target_link_options(tutti_cuda PRIVATE -Wl,--version-script=${CMAKE_SOURCE_DIR}/gpu/module.map
                      -Wl,--no-undefined)
  # Warnings flags of the C++ side mean nothing to nvcc's front end.
  target_compile_options(tutti_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
endfunction()
