# `scorch-run train` end to end (tests/train_cli_check.py): train generated models and check the
# loss, the gradient dump and the trained ONNX in onnxruntime; NaN stops without writing; kill -9
# while saving and resume gives bit-identical weights; fp16's loss scaler follows GradScaler's rules. Each test works in its own folder.
set(TRAIN_CLI_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/train_cli_check.py)
function(scorch_train_cli_test name)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/train_tmp/${name})
  file(MAKE_DIRECTORY ${dir})
  add_test(NAME ${name} COMMAND python3 ${TRAIN_CLI_CHECK} $<TARGET_FILE:scorch-run> ${ARGN} WORKING_DIRECTORY ${dir})
endfunction()

scorch_train_cli_test(train_cli_resnet roundtrip resnet)
scorch_train_cli_test(train_cli_gpt roundtrip gpt)
scorch_train_cli_test(train_cli_dranet roundtrip dranet)
scorch_train_cli_test(train_cli_nan nan)
scorch_train_cli_test(train_cli_fp16 fp16)
scorch_train_cli_test(train_cli_export_inputs export_inputs)
scorch_train_cli_test(train_cli_save_bf16_gpt save_bf16 gpt)
scorch_train_cli_test(train_cli_save_bf16_resnet save_bf16 resnet)
scorch_train_cli_test(train_cli_kill kill 6)
scorch_train_cli_test(train_cli_profile profile)
