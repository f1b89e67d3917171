# System libraries from the OS package manager (scripts/setup.sh installs them). Nothing is
# downloaded at configure or build time.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 2.1 REQUIRED)
find_package(spdlog REQUIRED)
find_package(ZLIB REQUIRED)
find_package(zstd REQUIRED)
find_package(ICU 66 REQUIRED COMPONENTS uc)
# The tokenizers: PCRE2 (libpcre2-dev, JIT-compiled) runs the Split regexes of HuggingFace
# tokenizer.json files.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# SentencePiece (libsentencepiece-dev) runs the SentencePiece tokenizer types, from a module of its
# own that only those types open (src/tokenizer/sentencepiece_library.h says why).
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
if(TARGET zstd::libzstd_shared)
  set(MEGATRON_ZSTD zstd::libzstd_shared)
else()
  set(MEGATRON_ZSTD zstd::libzstd_static)
endif()
if(MEGATRON_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
# TensorBoard event files: protobuf (libprotobuf-dev, protobuf-compiler) encodes the records,
# ISA-L (libisal-dev) computes their CRC-32C. Both come from scripts/setup.sh; a build without
# them refuses --tensorboard-dir with the reason.
find_package(Protobuf)
find_path(MEGATRON_ISAL_INCLUDE_DIR isa-l/crc.h)
find_library(MEGATRON_ISAL_LIBRARY isal)
if(Protobuf_FOUND AND Protobuf_PROTOC_EXECUTABLE AND MEGATRON_ISAL_INCLUDE_DIR AND MEGATRON_ISAL_LIBRARY)
  set(MEGATRON_HAVE_TENSORBOARD ON)
  message(STATUS "megatron: TensorBoard event files with protobuf ${Protobuf_VERSION} and ISA-L's CRC-32C")
else()
  set(MEGATRON_HAVE_TENSORBOARD OFF)
  message(STATUS "megatron: no protobuf or ISA-L found; --tensorboard-dir is refused (scripts/setup.sh installs them)")
endif()
# Open MPI (Debian's libopenmpi-dev): the CPU communicator and the launcher (mpirun, srun
# --mpi=pmix). MPIEXEC_EXECUTABLE runs the multi-rank tests. scripts/setup.sh installs it; a build
# without it (a bare GPU machine, scripts/gpu_check.sh) runs single processes only.
find_package(MPI COMPONENTS C)
set(MEGATRON_HAVE_MPI ${MPI_C_FOUND})
if(MEGATRON_HAVE_MPI)
  message(STATUS "megatron: MPI ${MPI_C_VERSION} from ${MPI_C_HEADER_DIR}; multi-rank tests launch with ${MPIEXEC_EXECUTABLE}")
else()
  message(STATUS "megatron: no MPI found; single-process runs only, the multi-rank tests are skipped (scripts/setup.sh installs Open MPI)")
endif()

# LibTorch, for the modules that hold tensors (parallel, model, optim, checkpoint, trainer).
# scripts/setup.sh points CMAKE_PREFIX_PATH at the pinned PyTorch wheel in .venv/. The CPU
# build links only torch_cpu and c10: the wheel's CUDA libraries are then never loaded, which
# keeps a CPU run independent of any GPU stack and its start-up fast.
set(MEGATRON_TORCH "AUTO" CACHE STRING "Build the LibTorch modules: AUTO (when Torch is found), ON, OFF")
set_property(CACHE MEGATRON_TORCH PROPERTY STRINGS AUTO ON OFF)
set(MEGATRON_HAVE_TORCH OFF)
set(MEGATRON_HAVE_TORCH_CUDA OFF)
if(NOT MEGATRON_TORCH STREQUAL "OFF")
  # Torch's CMake config appends its own -gencode list (down to sm_50, which nvcc 13 rejects) and
  # defines to the global CUDA flags; our kernels choose their architectures themselves.
  # It also unsets CMAKE_CUDA_ARCHITECTURES; both are restored.
  set(megatron_saved_cuda_flags "${CMAKE_CUDA_FLAGS}")
  set(megatron_saved_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
  if(MEGATRON_HAVE_CUDA)
    find_package(Torch QUIET)
  else()
    # The CUDA wheel's CMake config refuses to load without a CUDA toolkit, even for its CPU
    # half. A build without nvcc (a CPU machine, the CPU container image) needs only torch_cpu
    # and c10: import them from the wheel's folders directly.
    find_file(megatron_torch_config TorchConfigVersion.cmake PATH_SUFFIXES Torch NO_CACHE)
    if(megatron_torch_config)
      include(${megatron_torch_config})  # PACKAGE_VERSION
      get_filename_component(megatron_torch_root "${megatron_torch_config}/../../../.." ABSOLUTE)
      find_library(megatron_torch_cpu torch_cpu PATHS ${megatron_torch_root}/lib NO_DEFAULT_PATH NO_CACHE)
      find_library(megatron_c10 c10 PATHS ${megatron_torch_root}/lib NO_DEFAULT_PATH NO_CACHE)
    endif()
    if(megatron_torch_config AND megatron_torch_cpu AND megatron_c10 AND EXISTS ${megatron_torch_root}/include/torch)
      foreach(lib torch_cpu c10)
        add_library(${lib} SHARED IMPORTED)
        set_target_properties(${lib} PROPERTIES IMPORTED_LOCATION ${megatron_${lib}})
      endforeach()
      set(TORCH_INCLUDE_DIRS ${megatron_torch_root}/include ${megatron_torch_root}/include/torch/csrc/api/include)
      set(TORCH_CXX_FLAGS "")
      set(Torch_VERSION ${PACKAGE_VERSION})
      set(Torch_DIR "${megatron_torch_root} (torch_cpu and c10 only: no nvcc)")
      set(Torch_FOUND ON)
    endif()
  endif()
  set(CMAKE_CUDA_FLAGS "${megatron_saved_cuda_flags}")
  set(CMAKE_CUDA_ARCHITECTURES "${megatron_saved_cuda_archs}")
  if(Torch_FOUND)
    set(MEGATRON_HAVE_TORCH ON)
    add_library(megatron_libtorch INTERFACE)
    add_library(megatron::libtorch ALIAS megatron_libtorch)
    target_include_directories(megatron_libtorch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
    target_link_libraries(megatron_libtorch INTERFACE torch_cpu c10)
    separate_arguments(megatron_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
    target_compile_options(megatron_libtorch INTERFACE ${megatron_torch_flags})
    message(STATUS "megatron: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
    # The GPU-facing layer of the kernels (ATen tensors on CUDA) links LibTorch's CUDA half. It
    # compiles and links wherever nvcc and a CUDA LibTorch are present; it runs only with a GPU.
    if(MEGATRON_HAVE_CUDA AND TARGET torch_cuda AND TARGET c10_cuda)
      set(MEGATRON_HAVE_TORCH_CUDA ON)
      add_library(megatron_libtorch_cuda INTERFACE)
      add_library(megatron::libtorch_cuda ALIAS megatron_libtorch_cuda)
      # libtorch_cuda registers ATen's CUDA kernels from its static initialisers; no symbol of it
      # is referenced, so an --as-needed link (which torch_cpu's own link flags switch on) would
      # drop it and every CUDA tensor op would fail with "Could not run 'aten::empty.memory_format'
      # with arguments from the 'CUDA' backend". Linked unconditionally, as torch's own config does.
      target_link_libraries(megatron_libtorch_cuda INTERFACE megatron_libtorch
        "-Wl,--no-as-needed,\"$<TARGET_FILE:torch_cuda>\" -Wl,--as-needed" torch_cuda c10_cuda CUDA::cudart)
      message(STATUS "megatron: LibTorch CUDA layer enabled (GPU tests skip without a GPU)")
    endif()
  elseif(MEGATRON_TORCH STREQUAL "ON")
    message(FATAL_ERROR "MEGATRON_TORCH=ON but LibTorch was not found; run scripts/setup.sh or set CMAKE_PREFIX_PATH to torch.utils.cmake_prefix_path")
  else()
    message(STATUS "megatron: LibTorch not found; the training modules are skipped (scripts/setup.sh installs it)")
  endif()
endif()
