# convtune simulate / record end to end: replay of the shipped recording, every output format,
# the SVG parsed by an XML parser, record-then-replay, a trace, and bad input (exit 2, named
# option, no partial plot file).
include(${CMAKE_CURRENT_LIST_DIR}/cli_helpers.cmake)
function(expect_match var regex)
  if(NOT "${${var}}" MATCHES "${regex}")
    message(FATAL_ERROR "expected /${regex}/ in:\n${${var}}")
  endif()
endfunction()

set(W ${WORK}/sim_cli)
file(REMOVE_RECURSE ${W})
file(MAKE_DIRECTORY ${W})
set(REC ${DATA}/resnet50_cpu_infer.json)

# Replay of the shipped ResNet-50 recording: table, JSON, CSV, plot.
expect_rc(0 simulate --compare --workload resnet50 --shapes-dir ${SHAPES} --stream fixed --iterations 30 --replay ${REC} --plot ${W}/fixed.svg)
expect_match(LAST_OUT "recommendation: ")
expect_match(LAST_OUT "off +[0-9.]+ m?s")
# Five lines in an <svg> element, checked here; then parsed by an XML parser where Python is
# found. A build with the Python module (PYTHON_REQUIRED) must have it; otherwise its absence is
# said, not passed over.
file(READ ${W}/fixed.svg svg)
string(REGEX MATCHALL "<polyline" polylines "${svg}")
list(LENGTH polylines n_polylines)
if(NOT svg MATCHES "<svg[ >]" OR NOT svg MATCHES "</svg>[ \n]*$" OR NOT n_polylines EQUAL 6)
  message(FATAL_ERROR "the plot is not an <svg> element with six polylines (${n_polylines}):\n${svg}")
endif()
if(PYTHON)
  execute_process(COMMAND ${PYTHON} -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith('svg'), r.tag; assert len(r.findall('{http://www.w3.org/2000/svg}polyline')) == 6" ${W}/fixed.svg
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the plot is not well-formed SVG with six lines: ${err}")
  endif()
elseif(PYTHON_REQUIRED)
  message(FATAL_ERROR "no Python interpreter was found, but this build has the Python module: the SVG cannot be parsed as XML")
else()
  message(STATUS "SVG not parsed as XML: no Python interpreter was found (only the six polylines were checked)")
endif()
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --stream resolution --iterations 20 --replay ${REC} --json)
string(JSON n LENGTH "${LAST_OUT}" settings)
string(JSON setting GET "${LAST_OUT}" recommendation setting)
string(JSON estimated GET "${LAST_OUT}" estimated_problems)
if(NOT n EQUAL 6 OR setting STREQUAL "" OR estimated LESS 1)
  message(FATAL_ERROR "unexpected JSON: ${n} settings, recommendation '${setting}', ${estimated} estimated")
endif()
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --stream batch --iterations 7 --replay ${REC} --csv --flags off --flags pytorch)
string(REGEX MATCHALL "\n" lines "${LAST_OUT}")
list(LENGTH lines nl)
if(NOT nl EQUAL 15)
  message(FATAL_ERROR "expected a header and 14 CSV rows, got ${nl} lines:\n${LAST_OUT}")
endif()
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay ${REC} --strict --stream resolution --scales 0.5 --iterations 2)
expect_match(LAST_ERR "--replay: the recording has no timings for [0-9]+ of the [0-9]+ problems this simulation needs \\(--strict: none is estimated\\)")
# Without --strict a missing layer never refuses the run: estimated, counted and flagged.
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay ${REC} --stream resolution --scales 0.5 --iterations 2)
expect_match(LAST_OUT "estimated: [0-9]+ problems were not in the recording")
expect_match(LAST_OUT "estimated: [0-9.]+ m?s to [0-9.]+ m?s with every estimated problem")

# The recording library: a name resolves to its recordings, merged; another network runs on it
# with its layers estimated; an unknown name lists the names there are.
expect_rc(0 list recordings)
expect_match(LAST_OUT "h200  \\(--replay h200\\)")
expect_match(LAST_OUT "fwd f16 nhwc, batch 32: 23 problems")
expect_rc(0 list recordings --json)
string(JSON lib_name GET "${LAST_OUT}" recordings 1 name)
if(NOT lib_name STREQUAL "h200")
  message(FATAL_ERROR "list recordings --json: expected h200 second, got ${lib_name}")
endif()
# h100: one recording (ResNet-50 f16 inference) and PyTorch's own measurements.
string(JSON lib_name GET "${LAST_OUT}" recordings 0 name)
string(JSON h100_recordings LENGTH "${LAST_OUT}" recordings 0 recordings)
string(JSON h100_pytorch GET "${LAST_OUT}" recordings 0 pytorch covers)
if(NOT lib_name STREQUAL "h100" OR NOT h100_recordings EQUAL 1 OR NOT h100_pytorch MATCHES "^[0-9]+ workloads, [0-9]+ problems .*NVIDIA H100")
  message(FATAL_ERROR "list recordings --json: expected h100 first, with one recording and PyTorch's measurements: ${LAST_OUT}")
endif()
# Its recording times the f16 inference stream it was made of: every setting is simulated.
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay h100 --dtype f16 --layout nhwc --batch 32 --iterations 2)
expect_match(LAST_OUT "replay of h100 on backend cudnn \\(.*NVIDIA H100")
expect_match(LAST_OUT "\nadaptive ")
# A training stream has backward problems it never recorded: PyTorch's measured rows alone, saying why.
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay h100 --mode train --iterations 2)
expect_match(LAST_OUT "the settings other than off and pytorch are left out: the recordings of 'h100' cannot time 45 of the stream's 68 problems")
if(LAST_OUT MATCHES "\nadaptive ")
  message(FATAL_ERROR "--replay h100 of a training stream: only off and pytorch can be simulated:
${LAST_OUT}")
endif()
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay h200 --dtype f16 --layout nhwc --batch 32 --stream fixed --iterations 10)
expect_match(LAST_OUT "replay of h200 on backend cudnn")
if(LAST_OUT MATCHES "estimated:")
  message(FATAL_ERROR "the recorded ResNet-50 f16 batch 32 needs no estimate:
${LAST_OUT}")
endif()
expect_rc(0 simulate --workload mobilenet_dw --shapes-dir ${SHAPES} --replay h200 --mode train --batch 8 --stream fixed --iterations 10 --json)
string(JSON est GET "${LAST_OUT}" estimates problems)
string(JSON assumed GET "${LAST_OUT}" estimates assumed_support)
string(JSON extrap GET "${LAST_OUT}" estimates max_extrapolation)
# (settings 0 is off, taken from PyTorch's measured library: no recording estimate; 1 is on, replayed)
string(JSON range_lo GET "${LAST_OUT}" settings 1 estimate_range_ms 0)
if(est LESS 1 OR NOT assumed EQUAL est OR extrap LESS 1 OR range_lo STREQUAL "")
  message(FATAL_ERROR "mobilenet_dw on h200: ${est} estimated, ${assumed} assumed, extrapolation ${extrap}, range from ${range_lo}")
endif()
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay a100 --iterations 2)
expect_match(LAST_ERR "--replay: 'a100' is neither a recording file nor a name in the recording library \\(names: h100, h200;")
# A recording holds one kernel-cache state: --kernel-cache applies to PyTorch's measurements only.
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay ${REC} --kernel-cache cold --iterations 2)
expect_match(LAST_ERR "--kernel-cache: applies where PyTorch's measurements back it: with --pytorch-measured, or a --replay name")
# h100's library holds PyTorch's measurements: its off and pytorch rows, in the state asked.
expect_rc(0 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay h100 --kernel-cache cold --iterations 2)
expect_match(LAST_OUT "off and pytorch from PyTorch's measured library 'h100' \\(cold kernel cache\\), [0-9]+ of [0-9]+ problems predicted by its model")

# Record a small workload live on the CPU, then replay it; a trace runs live.
expect_rc(0 record --backend cpu --workload ${DATA}/tiny.workload --samples 1 --out ${W}/tiny.json)
expect_rc(0 simulate --workload ${DATA}/tiny.workload --replay ${W}/tiny.json --iterations 50 --plot ${W}/tiny.svg)
expect_match(LAST_OUT "tiny_cnn \\(3 layers, 5 convolutions per pass\\)")
expect_rc(0 simulate --stream trace:${DATA}/tiny.trace --backend cpu --iterations 4 --flags off --flags on)
expect_match(LAST_OUT "trace .*tiny.trace \\(3 iterations\\)")
# A trace runs as long as it is unless told; options that do not apply to it are refused.
expect_rc(0 simulate --stream trace:${DATA}/tiny.trace --backend cpu --flags off --repeats 1 --json)
string(JSON n GET "${LAST_OUT}" iterations)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "a 3-iteration trace simulated ${n} iterations by default")
endif()
foreach(args "--batch;4" "--mode;train" "--dtype;f16" "--layout;nhwc" "--batches;1,2" "--scales;0.5" "--shapes-dir;${SHAPES}")
  list(GET args 0 option)
  expect_rc(2 simulate --stream trace:${DATA}/tiny.trace --flags off ${args} --plot ${W}/trace-refused.svg)
  expect_match(LAST_ERR "${option}: does not apply to a trace stream")
  if(EXISTS ${W}/trace-refused.svg)
    message(FATAL_ERROR "simulate ${args} on a trace was refused but left its plot")
  endif()
endforeach()
expect_rc(2 simulate --stream trace:${DATA}/tiny.trace --repeats 0)
expect_match(LAST_ERR "--repeats")

# Bad input: exit 2, the option named, nothing written.
set(P ${W}/bad.svg)
foreach(args
    "--stream;sometimes"
    "--flags;nonsense"
    "--flags;x:benchmark=maybe"
    "--iterations;0"
    "--batches;1,0;--stream;batch"
    "--scales;-1;--stream;resolution"
    "--batches;1,2"
    "--batches;1,2;--stream;resolution"
    "--scales;0.5;--stream;batch"
    "--mode;sleep"
    "--replay;${W}/no-such-file.json"
    "--json;--csv")
  expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} ${args} --plot ${P})
  if(EXISTS ${P})
    message(FATAL_ERROR "simulate ${args} failed but left ${P}")
  endif()
endforeach()
expect_rc(2 simulate --workload no_such_net --shapes-dir ${SHAPES})
expect_match(LAST_ERR "--workload")
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --stream sometimes)
expect_match(LAST_ERR "--stream: unknown stream 'sometimes'")
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay ${REC} --plot ${W}/no/such/folder/x.svg)
expect_match(LAST_ERR "--plot")
file(WRITE ${W}/broken.json "{\"format\":\"convtune-recording\",\"version\":1}")
expect_rc(2 simulate --workload resnet50 --shapes-dir ${SHAPES} --replay ${W}/broken.json)
expect_match(LAST_ERR "broken.json: missing")
expect_rc(2 record --backend cpu --stream trace:${W}/none.trace --out ${W}/x.json)
expect_match(LAST_ERR "--stream: .*none.trace: cannot open trace file")
if(EXISTS ${W}/x.json)
  message(FATAL_ERROR "record failed but left its output")
endif()

# A problem nothing can run (the recording has no timings for it and estimates are refused on a
# tune's replay): NOT TUNED by name, the others tuned, a complete JSON document with a not_tuned
# field, exit 3, as under mpirun (issue 32, D3: the document stopped at "problems": [ with exit 2).
set(REC ${DATA}/resnet50_cpu_infer.json)
file(WRITE ${W}/mixed_shapes.txt "n=2,c=3,k=64,in=224x224,ker=7x7,stride=2x2,pad=3x3,pad_end=2x2\nn=3,c=5,k=7,in=9x9,ker=3x3\n")
foreach(form json text)
  set(args tune --replay ${REC} --shapes ${W}/mixed_shapes.txt)
  if(form STREQUAL "json")
    list(APPEND args --json)
  endif()
  expect_rc(3 ${args})
  expect_match(LAST_ERR "NOT TUNED: dir=fwd,dtype=f32,layout=nchw,n=3,c=5,k=7,[^\n]*: no algorithm of backend 'cpu' can run")
  if(form STREQUAL "json")
    string(JSON n_tuned LENGTH "${LAST_OUT}" problems)
    string(JSON n_not LENGTH "${LAST_OUT}" not_tuned)
    string(JSON not_problem GET "${LAST_OUT}" not_tuned 0 problem)
    string(JSON not_reason GET "${LAST_OUT}" not_tuned 0 reason)
    string(JSON from_db GET "${LAST_OUT}" from_database)
    if(NOT n_tuned EQUAL 1 OR NOT n_not EQUAL 1 OR NOT not_problem MATCHES "n=3,c=5,k=7" OR NOT not_reason MATCHES "no algorithm")
      message(FATAL_ERROR "tune --json with a problem nothing can run: ${n_tuned} tuned, ${n_not} not tuned:\n${LAST_OUT}")
    endif()
  else()
    expect_match(LAST_OUT "chosen cpu\\.")
  endif()
endforeach()
expect_rc(3 tune --replay ${REC} --problem n=3,c=5,k=7,in=9x9,ker=3x3 --json)
string(JSON n_not LENGTH "${LAST_OUT}" not_tuned)
if(NOT n_not EQUAL 1)
  message(FATAL_ERROR "tune --json of one problem nothing can run: not a whole document with it in not_tuned:\n${LAST_OUT}")
endif()
# Every problem tuned: not_tuned is there, empty, and the exit is 0.
expect_rc(0 tune --replay ${REC} --problem n=2,c=3,k=64,in=224x224,ker=7x7,stride=2x2,pad=3x3,pad_end=2x2 --json)
string(JSON n_not LENGTH "${LAST_OUT}" not_tuned)
if(NOT n_not EQUAL 0)
  message(FATAL_ERROR "tune --json: not_tuned should be empty:\n${LAST_OUT}")
endif()
