# `scorch-run train/run --device` end to end (tests/device_cli_check.py): --device cuda
# without a GPU (forced with CUDA_VISIBLE_DEVICES="") fails with exit 1 and the reason, auto and cpu
# train on the CPU and say so, bad values are usage errors; on a machine with a GPU and the CUDA
# backend built, --device cuda trains there with the CPU's losses.
if(TARGET scorch_cuda)
  set(scorch_device_has_cuda 1)
else()
  set(scorch_device_has_cuda 0)
endif()
set(dir ${CMAKE_CURRENT_BINARY_DIR}/device_tmp/cli)
file(MAKE_DIRECTORY ${dir})
add_test(NAME device_cli
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/device_cli_check.py $<TARGET_FILE:scorch-run> ${scorch_device_has_cuda}
         WORKING_DIRECTORY ${dir})
