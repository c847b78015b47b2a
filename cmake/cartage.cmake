# Build helpers shared by every folder: one library target per folder
# (cartage_library), one test binary per test file (cartage_test), and the
# tri-state optional dependencies (cartage_optional_dependency).

set(CARTAGE_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(CARTAGE_WERROR)
  list(APPEND CARTAGE_WARNINGS -Werror)
endif()

if(CARTAGE_SANITIZE)
  add_compile_options(-fsanitize=${CARTAGE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CARTAGE_SANITIZE})
endif()

# Link-time optimisation (Release, no sanitizers): a message crosses the
# agent, the CAR tables, the method and the collectives' engine, each its own
# library, and inlining across them pays (cartage-bench pingpong and barrier,
# 2 ranks). The libraries keep native code beside their LTO IR
# (-ffat-lto-objects), so that a program or method built out of tree without
# LTO still links them.
set(CARTAGE_LIBRARY_OPTIONS "")  # what cartage_library adds to every library
if(CARTAGE_LTO AND CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT CARTAGE_SANITIZE)
  include(CheckIPOSupported)
  check_ipo_supported(RESULT _ipo OUTPUT _ipo_why LANGUAGES CXX)
  if(_ipo)
    set(CMAKE_INTERPROCEDURAL_OPTIMIZATION ON)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      set(CARTAGE_LIBRARY_OPTIONS -ffat-lto-objects)
    endif()
    message(STATUS "cartage: link-time optimisation: ON")
  else()
    message(STATUS "cartage: link-time optimisation: OFF (${_ipo_why})")
  endif()
endif()

# cartage_library(NAME <name> SRCS ... [DEPS ...])
# Makes target cartage_<name> with alias cartage::<name>; includes are rooted
# at the repository root (#include "fsm/machine.h").
function(cartage_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;DEPS" ${ARGN})
  set(target cartage_${L_NAME})
  add_library(${target} ${L_SRCS})
  add_library(cartage::${L_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    $<INSTALL_INTERFACE:include>)
  target_compile_options(${target} PRIVATE ${CARTAGE_WARNINGS} ${CARTAGE_LIBRARY_OPTIONS})
  target_link_libraries(${target} PUBLIC ${L_DEPS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${L_NAME})
  install(TARGETS ${target} EXPORT cartageTargets ARCHIVE DESTINATION lib)
endfunction()

# cartage_test(NAME <name> SRCS ... [DEPS ...] [LABELS ...])
# One gtest binary, registered with ctest test by test, labelled (unit,
# conformance, multiproc, hw, bench).
# TRACE DIR: its jobs record their transitions into DIR (CARTAGE_TRACE),
# after DIR is emptied (test trace_clean_DIR) and before `cartage trace
# check` replays them (trace_check_DIR, see cartage_trace_check).
function(cartage_test)
  cmake_parse_arguments(T "" "NAME;TRACE" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${T_NAME} PRIVATE ${CARTAGE_WARNINGS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  set(trace)
  if(T_TRACE)
    set(trace ENVIRONMENT CARTAGE_TRACE=${PROJECT_BINARY_DIR}/traces/${T_TRACE}
              FIXTURES_REQUIRED trace_clean_${T_TRACE} FIXTURES_SETUP trace_${T_TRACE})
  endif()
  # LABELS last: the generated set_tests_properties splits a list of labels,
  # and only the first then counts; put before the others, the rest would
  # take their places.
  gtest_discover_tests(${T_NAME} PROPERTIES ${trace} LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()

# The tests around the traces of cartage_test(... TRACE DIR): empty DIR
# first, replay every job in it against the tables once they all ran, and
# check the newest job's merged JSON against the Trace Event Format.
function(cartage_trace_check dir)
  set(d ${PROJECT_BINARY_DIR}/traces/${dir})
  add_test(NAME trace_clean_${dir} COMMAND ${CMAKE_COMMAND} -E rm -rf ${d})
  set_tests_properties(trace_clean_${dir} PROPERTIES FIXTURES_SETUP trace_clean_${dir})
  add_test(NAME trace_check_${dir}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/trace_check.sh $<TARGET_FILE:cartage> ${d} ${PROJECT_SOURCE_DIR})
  set_tests_properties(trace_check_${dir} PROPERTIES FIXTURES_REQUIRED trace_${dir} TIMEOUT 300)
endfunction()

# cartage_optional_dependency(<KEY> <pkg-config module> <what it enables>)
# CARTAGE_WITH_<KEY> is AUTO (build when found), ON (fail without it) or OFF.
# Sets CARTAGE_HAVE_<KEY> (0/1) for the generated config header.
function(cartage_optional_dependency key module what)
  set(CARTAGE_WITH_${key} AUTO CACHE STRING "Build ${what}: AUTO, ON or OFF")
  set_property(CACHE CARTAGE_WITH_${key} PROPERTY STRINGS AUTO ON OFF)
  set(mode ${CARTAGE_WITH_${key}})
  set(have 0)
  if(NOT mode STREQUAL "OFF")
    pkg_check_modules(${key} QUIET IMPORTED_TARGET ${module})
    if(${key}_FOUND)
      set(have 1)
      message(STATUS "cartage: ${what}: ON (${module} ${${key}_VERSION})")
    elseif(mode STREQUAL "ON")
      message(FATAL_ERROR "cartage: CARTAGE_WITH_${key}=ON but pkg-config finds no ${module}")
    else()
      message(STATUS "cartage: ${what}: OFF (${module} not found)")
    endif()
  else()
    message(STATUS "cartage: ${what}: OFF (CARTAGE_WITH_${key}=OFF)")
  endif()
  set(CARTAGE_HAVE_${key} ${have} PARENT_SCOPE)
  set(CARTAGE_${key}_VERSION "${${key}_VERSION}" PARENT_SCOPE)
endfunction()

# cartage_method(NAME <name> TARGET <library> HEADER <path> DESCRIPTOR <c++ name>)
# Declares a built-in method from its own folder: methods/CMakeLists.txt
# turns the declarations into the registry's list (generated
# methods/builtin_methods.inc), in the order the folders are added.
function(cartage_method)
  cmake_parse_arguments(M "" "NAME;TARGET;HEADER;DESCRIPTOR" "" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY CARTAGE_METHOD_HEADERS "${M_HEADER}")
  set_property(GLOBAL APPEND PROPERTY CARTAGE_METHOD_DESCRIPTORS "${M_DESCRIPTOR}")
  set_property(GLOBAL APPEND PROPERTY CARTAGE_METHOD_TARGETS "${M_TARGET}")
  set_property(GLOBAL APPEND PROPERTY CARTAGE_METHOD_NAMES "${M_NAME}")
endfunction()
