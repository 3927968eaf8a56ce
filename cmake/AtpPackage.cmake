# Installs the public headers and the component libraries, and exports the
# `libatp` CMake package: find_package(libatp) then link atp::atp.
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/atp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The Wireshark dissector (docs/observability.md).
install(FILES ${PROJECT_SOURCE_DIR}/tools/wireshark/atp.lua
        DESTINATION ${CMAKE_INSTALL_DATADIR}/libatp/wireshark)
install(FILES ${PROJECT_BINARY_DIR}/include/atp/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/atp)
install(TARGETS ${ATP_INSTALLED_TARGETS} EXPORT libatpTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT libatpTargets NAMESPACE atp::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libatp)

configure_package_config_file(cmake/libatpConfig.cmake.in
    ${PROJECT_BINARY_DIR}/libatpConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libatp)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/libatpConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/libatpConfig.cmake
              ${PROJECT_BINARY_DIR}/libatpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/libatp)
