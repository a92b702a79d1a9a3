# ONNX backend node tests as the conformance suite, one ctest entry per case (onnx2c's habit).
#
# The cases are the committed list tests/conformance/cases.txt (every node test whose model uses only
# ops from graph/ops.def; regenerate with tests/conformance/list_cases.py). Cases listed in
# tests/conformance/skip.txt ("test_name: reason") are registered DISABLED so ctest reports them as
# not run; the reason lives in skip.txt. The data comes from the onnx Python package (the pinned
# onnx==1.16.2 of scripts/install.sh); configure only asks Python where that package is.

add_executable(conformance_runner ${CMAKE_CURRENT_SOURCE_DIR}/conformance/conformance_runner.c)
target_link_libraries(conformance_runner PRIVATE scorch sc_ref_exec)

# The python3 on PATH (possibly a pyenv one), the interpreter scripts/install.sh installs onnx for.
find_program(SCORCH_PYTHON3 python3)
set(SCORCH_ONNX_NODE_DIR "" CACHE PATH "onnx/backend/test/data/node (found from the onnx Python package when empty)")
if(NOT SCORCH_ONNX_NODE_DIR AND SCORCH_PYTHON3)
  execute_process(
    COMMAND ${SCORCH_PYTHON3} -c
      "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))"
    OUTPUT_VARIABLE _node_dir OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _node_rc ERROR_QUIET)
  if(_node_rc EQUAL 0 AND IS_DIRECTORY "${_node_dir}")
    set(SCORCH_ONNX_NODE_DIR "${_node_dir}" CACHE PATH "onnx/backend/test/data/node" FORCE)
  endif()
endif()

set(_conf_dir ${CMAKE_CURRENT_SOURCE_DIR}/conformance)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_conf_dir}/cases.txt ${_conf_dir}/skip.txt)

if(NOT IS_DIRECTORY "${SCORCH_ONNX_NODE_DIR}")
  # Missing data must fail the suite, not silently shrink it.
  message(WARNING "ONNX node test data not found (pip install onnx==1.16.2, or set SCORCH_ONNX_NODE_DIR)")
  add_test(NAME onnx_node_data_missing_run_scripts_install_sh COMMAND ${CMAKE_COMMAND} -E false)
  set_tests_properties(onnx_node_data_missing_run_scripts_install_sh PROPERTIES LABELS conformance)
  return()
endif()

# skip.txt: "test_name: reason", '#' starts a comment.
file(STRINGS ${_conf_dir}/skip.txt _skip_lines)
set(_skipped "")
foreach(line IN LISTS _skip_lines)
  if(line MATCHES "^[ \t]*(test_[A-Za-z0-9_]+)[ \t]*:[ \t]*(.+)$")
    list(APPEND _skipped ${CMAKE_MATCH_1})
  elseif(NOT line MATCHES "^[ \t]*(#.*)?$")
    message(FATAL_ERROR "tests/conformance/skip.txt: malformed line '${line}' (want 'test_name: reason')")
  endif()
endforeach()

file(STRINGS ${_conf_dir}/cases.txt _case_lines)
set(_n_cases 0)
set(_n_skipped 0)
foreach(case IN LISTS _case_lines)
  if(case MATCHES "^[ \t]*(#.*)?$")
    continue()
  endif()
  if(NOT IS_DIRECTORY "${SCORCH_ONNX_NODE_DIR}/${case}")
    message(FATAL_ERROR "tests/conformance/cases.txt: ${case} is not in ${SCORCH_ONNX_NODE_DIR} "
                        "(is the onnx package the pinned 1.16.2? regenerate with list_cases.py)")
  endif()
  string(REGEX REPLACE "^test_" "" _short ${case})
  add_test(NAME onnx_node_${_short} COMMAND conformance_runner ${SCORCH_ONNX_NODE_DIR}/${case})
  set_tests_properties(onnx_node_${_short} PROPERTIES LABELS conformance TIMEOUT 120)
  math(EXPR _n_cases "${_n_cases} + 1")
  if(case IN_LIST _skipped)
    set_tests_properties(onnx_node_${_short} PROPERTIES DISABLED TRUE)
    math(EXPR _n_skipped "${_n_skipped} + 1")
  endif()
endforeach()
foreach(case IN LISTS _skipped)
  if(NOT case IN_LIST _case_lines)
    message(WARNING "tests/conformance/skip.txt: ${case} is not in cases.txt (stale entry)")
  endif()
endforeach()
message(STATUS "ONNX conformance: ${_n_cases} node tests, ${_n_skipped} skipped (tests/conformance/skip.txt)")

# The committed list must match ops.def: adding an op without regenerating cases.txt fails here.
if(SCORCH_PYTHON3)
  add_test(NAME onnx_node_cases_current
           COMMAND ${SCORCH_PYTHON3} ${_conf_dir}/list_cases.py --check)
  set_tests_properties(onnx_node_cases_current PROPERTIES LABELS conformance TIMEOUT 300)
endif()
