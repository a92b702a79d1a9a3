# The stages only look downstream (tests/layering_check.py): no include of a later stage's header.
add_test(NAME layering COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/layering_check.py ${CMAKE_SOURCE_DIR})
