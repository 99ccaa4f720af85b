# Every function a level's merged object (backends/cpu/CMakeLists.txt) defines for the rest of the
# program lies in the level's namespace: no inline function or template instance compiled for
# x86-64-v3 or x86-64-v4 can stand in for the baseline copy the rest of convtune calls. Data may
# be shared: the static variables of inline functions (weak objects, nm type V) are one object per
# program, as the language requires, whichever copy of the function initialises them.
# -DNM=<nm> -DOBJECTS="<namespace>=<object>|..."
string(REPLACE "|" ";" OBJECTS "${OBJECTS}")
foreach(entry IN LISTS OBJECTS)
  string(REGEX MATCH "^([^=]+)=(.*)$" _ "${entry}")
  set(ns ${CMAKE_MATCH_1})
  set(object ${CMAKE_MATCH_2})
  execute_process(COMMAND ${NM} -g --defined-only ${object} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${object} failed (${rc})")
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(count 0)
  foreach(line IN LISTS lines)
    if(line STREQUAL "")
      continue()
    endif()
    math(EXPR count "${count} + 1")
    if(NOT line MATCHES "${ns}" AND NOT line MATCHES "^[0-9a-f]* V ")
      message(FATAL_ERROR "${object} exports a symbol outside ${ns}: ${line}")
    endif()
  endforeach()
  if(count EQUAL 0)
    message(FATAL_ERROR "${object} exports nothing")
  endif()
  message(STATUS "${ns}: ${count} global symbols, all in the namespace")
endforeach()
