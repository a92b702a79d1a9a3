# No dependency cycles between library files (tests/cycles_check.py reads the built objects).
add_test(NAME file_cycles COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/cycles_check.py ${CMAKE_BINARY_DIR})
