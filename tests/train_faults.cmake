# Faults during `scorch-run train` (tests/train_faults.py): SIGINT / SIGTERM save the state and exit
# 130 / 143 and the resumed run is byte-identical; a full disk (RLIMIT_FSIZE) while saving leaves
# the previous state intact; bad data is refused naming the file and the index; too little host
# memory is refused before step 1 with the figures. One folder each.
set(TRAIN_FAULTS ${CMAKE_CURRENT_SOURCE_DIR}/train_faults.py)
function(scorch_train_faults_test name)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/train_tmp/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name} COMMAND python3 ${TRAIN_FAULTS} $<TARGET_FILE:scorch-run> ${ARGN} WORKING_DIRECTORY ${dir})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300)
endfunction()

scorch_train_faults_test(train_faults_sigint signal INT)
scorch_train_faults_test(train_faults_sigterm signal TERM)
scorch_train_faults_test(train_faults_disk disk)
scorch_train_faults_test(train_faults_data data)
scorch_train_faults_test(train_faults_alloc alloc)
scorch_train_faults_test(train_faults_hostmem hostmem)
