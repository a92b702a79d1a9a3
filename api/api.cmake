# libscorch.so: the public API (include/scorch.h) as a versioned shared library, installed with
# `cmake --install` together with its header, a pkg-config file (scorch.pc) and a CMake package
# (find_package(Scorch) -> Scorch::scorch). The static library goes in whole (with the CUDA
# backend when this build has it); the version script exports the scorch_* symbols only.
set(SCORCH_VERSION_MAJOR 0)
set(SCORCH_VERSION 0.2.0)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(scorch_shared SHARED ${CMAKE_SOURCE_DIR}/api/scorch_so.c)
# The archives by path between --whole-archive flags ($<LINK_LIBRARY:WHOLE_ARCHIVE> refuses them:
# scorch and scorch_cuda name each other), then linked normally for their dependencies.
set(scorch_whole $<TARGET_FILE:scorch>)
if(TARGET scorch_cuda)
  list(APPEND scorch_whole $<TARGET_FILE:scorch_cuda>)
  add_dependencies(scorch_shared scorch_cuda)
endif()
add_dependencies(scorch_shared scorch)
target_link_libraries(scorch_shared PRIVATE -Wl,--whole-archive ${scorch_whole} -Wl,--no-whole-archive scorch)
if(TARGET scorch_cuda)
  target_link_libraries(scorch_shared PRIVATE scorch_cuda)
endif()
target_include_directories(scorch_shared PUBLIC ${CMAKE_SOURCE_DIR}/include)
target_link_options(scorch_shared PRIVATE -Wl,--version-script=${CMAKE_SOURCE_DIR}/api/scorch.map)
if(NOT SCORCH_SANITIZE AND NOT SCORCH_FUZZ)
  # every dependency named at link time (a sanitizer's runtime comes from the executable instead)
  target_link_options(scorch_shared PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(scorch_shared PROPERTIES OUTPUT_NAME scorch VERSION ${SCORCH_VERSION}
  SOVERSION ${SCORCH_VERSION_MAJOR} LINK_DEPENDS ${CMAKE_SOURCE_DIR}/api/scorch.map)

# pkg-config: relocatable (the prefix is found from the .pc file's own folder), so an install
# under any --prefix works as installed.
string(REGEX MATCHALL "[^/]+" scorch_pc_parts "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(SCORCH_PC_UP "")
foreach(part ${scorch_pc_parts})
  string(APPEND SCORCH_PC_UP "/..")
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/api/scorch.pc.in ${CMAKE_BINARY_DIR}/scorch.pc @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/api/ScorchConfig.cmake.in ${CMAKE_BINARY_DIR}/ScorchConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ScorchConfigVersion.cmake VERSION ${SCORCH_VERSION}
  COMPATIBILITY SameMajorVersion)

install(TARGETS scorch_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/scorch.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/scorch.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${CMAKE_BINARY_DIR}/ScorchConfig.cmake ${CMAKE_BINARY_DIR}/ScorchConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Scorch)
