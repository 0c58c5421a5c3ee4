# Read by llama.cpp's project() when llama-cpp-python is built with
#   CMAKE_ARGS="-DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/packaging/llama-cpp-lean.cmake ..."
# llama-cpp-python forces llama.cpp's "common" library on, yet its Python bindings load only
# libllama and libggml*: common is about 40% of what the build compiles, for nothing we load.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
