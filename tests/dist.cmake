# Data-parallel training (tests/dist_check.py): `mpirun -np 2` on localhost, when this build has MPI
# (backends/comm.h). invariance: 2 ranks x batch 4 against 1 rank x batch 8 on a GPT within 1e-6 and
# bit-identical across two runs; shard: --shard-optimizer against unsharded; kill / hang: a rank
# killed or stopped mid-run ends the job within 60 s naming it, and the last checkpoint resumes.
# The PyTorch DDP peer (gloo) is tests/e2e/e2e_ddp.py, registered here too.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  set(DIST_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/dist_check.py)
  find_program(DIST_TORCH_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  foreach(check invariance shard kill hang)
    add_test(NAME dist_${check}
             COMMAND ${DIST_TORCH_PYTHON} ${DIST_CHECK} $<TARGET_FILE:scorch-run> ${MPIEXEC_EXECUTABLE}
                     ${CMAKE_CURRENT_BINARY_DIR}/dist_tmp/${check} ${check})
    set_tests_properties(dist_${check} PROPERTIES TIMEOUT 300 LABELS dist)
  endforeach()
  # two ranks on two cores: not beside other tests that time or stop processes
  set_tests_properties(dist_kill dist_hang PROPERTIES RUN_SERIAL TRUE)
  # the peer: PyTorch DDP (gloo), 3 steps, within PyTorch's own float32 spread (tests/e2e/e2e_ddp.py)
  if(DIST_TORCH_PYTHON)
    foreach(model gpt resnet18)
      add_test(NAME e2e_ddp_${model}
               COMMAND ${DIST_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/e2e/e2e_ddp.py --scorch $<TARGET_FILE:scorch-run>
                       --workdir ${CMAKE_CURRENT_BINARY_DIR}/dist_tmp/ddp_${model} --model ${model})
      set_tests_properties(e2e_ddp_${model} PROPERTIES TIMEOUT 300 LABELS "dist;e2e")
    endforeach()
  endif()
  if(TARGET scorch_cuda)
    # the CUDA backend's collectives and GPU-per-local-rank (skipped without a device; runs on the
    # emulator in CI, where Open MPI's own allocations left at MPI_Finalize are not ours to report)
    add_test(NAME dist_cuda
             COMMAND ${DIST_TORCH_PYTHON} ${DIST_CHECK} $<TARGET_FILE:scorch-run> ${MPIEXEC_EXECUTABLE}
                     ${CMAKE_CURRENT_BINARY_DIR}/dist_tmp/cuda cuda)
    set_tests_properties(dist_cuda PROPERTIES TIMEOUT 600 LABELS "dist;cuda" SKIP_RETURN_CODE 77
                         ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
else()
  # a build without MPI (SCORCH_MPI=OFF, or no libopenmpi-dev): launched as one of several ranks it
  # stops with the reason, naming what to install (the portability stage of scripts/run_tests.sh)
  add_test(NAME dist_nompi
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/dist_check.py $<TARGET_FILE:scorch-run> none
                   ${CMAKE_CURRENT_BINARY_DIR}/dist_tmp/nompi nompi)
  set_tests_properties(dist_nompi PROPERTIES TIMEOUT 120 LABELS dist)
endif()
