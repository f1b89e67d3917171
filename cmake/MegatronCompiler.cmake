# Compiler launcher (ccache when present), warnings, and the CUDA language when nvcc is found.
# ccache settings travel with each compile: hits across clone folders (base dir), and the
# precompiled LibTorch headers, which ccache refuses to cache without the pch sloppiness.
find_program(MEGATRON_CCACHE ccache)
if(MEGATRON_CCACHE)
  set(megatron_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime ${MEGATRON_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${megatron_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${megatron_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${megatron_launcher})
endif()

set(MEGATRON_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wno-unused-parameter)

# CMake 3.25 knows no CUDA20 flag for nvcc. Set even when our CUDA sources are off: the CUDA
# LibTorch's own CMake config compiles a probe with nvcc whenever a toolkit is installed.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

set(MEGATRON_HAVE_CUDA OFF)
if(NOT MEGATRON_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${MEGATRON_CUDA_ARCHITECTURES}")
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MEGATRON_HAVE_CUDA ON)
    message(STATUS "megatron: CUDA sources compile for sm_${MEGATRON_CUDA_ARCHITECTURES} with ${CMAKE_CUDA_COMPILER}")
  elseif(MEGATRON_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MEGATRON_CUDA=ON but no CUDA compiler was found; set CMAKE_CUDA_COMPILER or use -DMEGATRON_CUDA=AUTO")
  else()
    message(STATUS "megatron: no nvcc found; CUDA sources are skipped")
  endif()
endif()
