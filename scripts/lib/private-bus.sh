# Sourced by the provider harnesses: writes the configuration of a private D-Bus session bus on
# which nothing can be started by activation (an empty service directory), so the provider under
# test is the only org.freedesktop.secrets owner — a call made before it appears must not start
# gnome-keyring instead.
#   write_private_bus_config DIR   writes DIR/session.conf (and the empty DIR/dbus-services)
write_private_bus_config() {
    mkdir -p "$1/dbus-services"
    cat >"$1/session.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$1/dbus-services</servicedir>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
}
