-- tools/wireshark/atp.lua: a Wireshark / tshark dissector for ATP frames
-- (in-network aggregation, NSDI'21), as ATP-SPEC section 2 defines them:
-- UDP to ports base_port .. base_port + 15 (default 50000), a 16-byte ATP
-- header and 62 values (int32, or float32 when the fp flag is set).
--
--   tshark -X lua_script:tools/wireshark/atp.lua -r w0-tx-00000.pcap -V
--   wireshark -X lua_script:/usr/share/libatp/wireshark/atp.lua -r capture.pcap
--
-- or copy it into ~/.local/lib/wireshark/plugins/ (installed with libatp in
-- share/libatp/wireshark/). Filter fields: atp.job, atp.seq, atp.queue,
-- atpagg.position, atp.bitmap0, atp.bitmap1, atp.fanin0, atp.fanin1, atp.edge,
-- atp.resend, atp.collision, atp.ecn, atp.ack, atp.fp, atp.aggregator,
-- atp.new_aggregator, atp.udp_queue, atp.kind, atp.value_int, atp.value_float.
-- Expert info marks what a switch pipeline would refuse (job 0, a bitmap
-- naming a member beyond its fan-in, an empty bitmap, a level-1 gradient
-- naming other than one rack, a UDP port that does not match seq's queue,
-- a wrong length). Control frames (fp, resend and collision all set: joins,
-- kOpBegins, statuses; lib/wire/control_message.h) show as such, their
-- magic, version, type, sender and incarnation decoded instead of values.
-- The base port is a protocol preference (atp.base_port).

local bitops = bit32 or bit

local atp = Proto("atpagg", "ATP in-network aggregation")

local kHeaderBytes = 16
local kValues = 62
local kMessageBytes = kHeaderBytes + kValues * 4

local f = atp.fields
f.job = ProtoField.uint8("atpagg.job", "Job", base.DEC)
f.seq = ProtoField.uint24("atpagg.seq", "Seq", base.HEX)
f.queue = ProtoField.uint8("atpagg.queue", "Queue (seq bits 23..20)", base.DEC)
f.position = ProtoField.uint24("atpagg.position", "Position (seq bits 19..0)", base.DEC)
f.bitmap0 = ProtoField.uint32("atpagg.bitmap0", "Bitmap0 (level-1 contributors: workers)", base.HEX)
f.bitmap1 = ProtoField.uint32("atpagg.bitmap1", "Bitmap1 (level-2 contributors: racks)", base.HEX)
f.new_aggregator = ProtoField.uint16("atpagg.new_aggregator", "New aggregator index (bitmap1 low 16 bits)", base.DEC)
f.fanin0 = ProtoField.uint8("atpagg.fanin0", "FanIn0 (workers in the rack)", base.DEC)
f.fanin1 = ProtoField.uint8("atpagg.fanin1", "FanIn1 (racks in the job)", base.DEC)
f.flags = ProtoField.uint16("atpagg.flags", "Fan-ins and flags", base.HEX)
f.edge = ProtoField.bool("atpagg.edge", "Edge (level 2)", 16, nil, 0x0020)
f.resend = ProtoField.bool("atpagg.resend", "Resend", 16, nil, 0x0010)
f.collision = ProtoField.bool("atpagg.collision", "Collision", 16, nil, 0x0008)
f.ecn = ProtoField.bool("atpagg.ecn", "ECN", 16, nil, 0x0004)
f.ack = ProtoField.bool("atpagg.ack", "Ack (parameter packet)", 16, nil, 0x0002)
f.fp = ProtoField.bool("atpagg.fp", "FP (float32 values)", 16, nil, 0x0001)
f.aggregator = ProtoField.uint16("atpagg.aggregator", "Aggregator index", base.DEC)
f.udp_queue = ProtoField.uint8("atpagg.udp_queue", "Queue (from the UDP port)", base.DEC)
f.kind = ProtoField.string("atpagg.kind", "Kind")
f.values = ProtoField.bytes("atpagg.values", "Values")
f.value_int = ProtoField.int32("atpagg.value_int", "Value", base.DEC)
f.value_float = ProtoField.float("atpagg.value_float", "Value")
-- kControlTypes: a control frame's type byte (lib/wire/control_message.h's
-- ControlType) by name.
local kControlTypes = {[1] = "pull", [2] = "join", [3] = "status", [4] = "operation begins",
                       [5] = "replay"}
f.control_type = ProtoField.uint8("atpagg.control_type", "Control type", base.DEC, kControlTypes)
f.control_version = ProtoField.uint8("atpagg.control_version", "Control version", base.DEC)
f.control_sender = ProtoField.uint32("atpagg.control_sender", "Control sender (worker index; 0xffffffff: the PS)", base.HEX)
f.control_incarnation = ProtoField.uint64("atpagg.control_incarnation", "Sender's incarnation", base.HEX)

local e = atp.experts
e.job_zero = ProtoExpert.new("atpagg.job_zero", "Job 0 is never valid on the wire",
                             expert.group.MALFORMED, expert.severity.ERROR)
e.bitmap0_beyond = ProtoExpert.new("atpagg.bitmap0_beyond_fanin", "Bitmap0 names a worker >= fanIn0",
                                   expert.group.MALFORMED, expert.severity.ERROR)
e.bitmap1_beyond = ProtoExpert.new("atpagg.bitmap1_beyond_fanin", "Bitmap1 names a rack >= fanIn1",
                                   expert.group.MALFORMED, expert.severity.ERROR)
e.empty_bitmap = ProtoExpert.new("atpagg.empty_bitmap", "A gradient with no contributor",
                                 expert.group.MALFORMED, expert.severity.ERROR)
e.ambiguous_rack = ProtoExpert.new("atpagg.ambiguous_rack", "A level-1 gradient names other than one rack",
                                   expert.group.MALFORMED, expert.severity.ERROR)
e.bad_port = ProtoExpert.new("atpagg.bad_udp_port", "UDP port is not base port + seq's queue",
                             expert.group.MALFORMED, expert.severity.ERROR)
e.bad_length = ProtoExpert.new("atpagg.bad_length", "An ATP message is 264 bytes",
                               expert.group.MALFORMED, expert.severity.ERROR)
e.resend = ProtoExpert.new("atpagg.resend_note", "Retransmission (or a partial result flushed by one)",
                           expert.group.SEQUENCE, expert.severity.NOTE)
e.collision = ProtoExpert.new("atpagg.collision_note", "Aggregator collision: not aggregated in the switch",
                              expert.group.SEQUENCE, expert.severity.WARN)
e.ecn = ProtoExpert.new("atpagg.ecn_note", "Congestion seen on the way", expert.group.SEQUENCE,
                        expert.severity.NOTE)
e.bad_control = ProtoExpert.new("atpagg.bad_control_magic",
                                "Control flags set, but the payload lacks the control magic 0xa7c0",
                                expert.group.MALFORMED, expert.severity.ERROR)

atp.prefs.base_port = Pref.uint("Base UDP port", 50000, "Queue i uses UDP port base + i (16 queues)")

local udp_srcport = Field.new("udp.srcport")
local udp_dstport = Field.new("udp.dstport")

local function popcount(x)
  local n = 0
  while x ~= 0 do
    x = bitops.band(x, x - 1)
    n = n + 1
  end
  return n
end

-- beyond(bitmap, fanin): bits at positions >= fanin.
local function beyond(bitmap, fanin)
  if fanin >= 32 then return false end
  return bitops.rshift(bitmap, fanin) ~= 0
end

local kControlMagic = 0xA7C0

local function kind_of(ack, fp, resend, collision, edge)
  -- No data packet has all three (lib/wire/control_message.h, IsControl).
  if fp and resend and collision then
    return ack and "control (PS to workers)" or "control (worker to PS)"
  end
  if ack then
    if collision then return "parameter (collision: new aggregator index)" end
    if resend and not fp then return "overflow request (resend as float32)" end
    return fp and "parameter (float32)" or "parameter"
  end
  local level = edge and "level 2" or "level 1"
  if fp then return "gradient (float32, " .. level .. ")" end
  if resend then return "gradient (resend, " .. level .. ")" end
  return "gradient (" .. level .. ")"
end

function atp.dissector(tvb, pinfo, tree)
  local length = tvb:len()
  if length < kHeaderBytes then return 0 end
  pinfo.cols.protocol = "ATP"
  local subtree = tree:add(atp, tvb(0, math.min(length, kMessageBytes)))
  if length ~= kMessageBytes then subtree:add_proto_expert_info(e.bad_length) end

  local job = tvb(0, 1):uint()
  local seq = tvb(1, 3):uint()
  local queue = bitops.rshift(seq, 20)
  local position = bitops.band(seq, 0xFFFFF)
  local bitmap0 = tvb(4, 4):uint()
  local bitmap1 = tvb(8, 4):uint()
  local word = tvb(12, 2):uint()
  local fanin0 = bitops.band(bitops.rshift(word, 11), 0x1F) + 1
  local fanin1 = bitops.band(bitops.rshift(word, 6), 0x1F) + 1
  local edge = bitops.band(word, 0x20) ~= 0
  local resend = bitops.band(word, 0x10) ~= 0
  local collision = bitops.band(word, 0x08) ~= 0
  local ecn = bitops.band(word, 0x04) ~= 0
  local ack = bitops.band(word, 0x02) ~= 0
  local fp = bitops.band(word, 0x01) ~= 0
  local aggregator = tvb(14, 2):uint()
  local kind = kind_of(ack, fp, resend, collision, edge)
  local control = fp and resend and collision
  if control and length >= kHeaderBytes + 4 then
    local type_name = kControlTypes[tvb(kHeaderBytes + 3, 1):uint()]
    if type_name ~= nil then kind = kind .. ": " .. type_name end
  end

  local job_item = subtree:add(f.job, tvb(0, 1))
  if job == 0 then job_item:add_proto_expert_info(e.job_zero) end
  subtree:add(f.seq, tvb(1, 3))
  subtree:add(f.queue, tvb(1, 1), queue)
  subtree:add(f.position, tvb(1, 3), position)
  local b0 = subtree:add(f.bitmap0, tvb(4, 4))
  local b1 = subtree:add(f.bitmap1, tvb(8, 4))
  if ack and collision then subtree:add(f.new_aggregator, tvb(10, 2)) end
  local flags = subtree:add(f.flags, tvb(12, 2))
  flags:add(f.fanin0, tvb(12, 1), fanin0)
  flags:add(f.fanin1, tvb(12, 2), fanin1)
  flags:add(f.edge, tvb(12, 2))
  flags:add(f.resend, tvb(12, 2))
  flags:add(f.collision, tvb(12, 2))
  flags:add(f.ecn, tvb(12, 2))
  flags:add(f.ack, tvb(12, 2))
  flags:add(f.fp, tvb(12, 2))
  subtree:add(f.aggregator, tvb(14, 2))
  subtree:add(f.kind, kind)

  -- What a switch pipeline (and a PS) refuses, in wire::ValidateHeader's
  -- terms: the bitmaps against the fan-ins (bitmap1 of a parameter packet
  -- with collision carries an index instead), and a gradient's contributors.
  if beyond(bitmap0, fanin0) then b0:add_proto_expert_info(e.bitmap0_beyond) end
  if beyond(bitmap1, fanin1) and not (ack and collision) then
    b1:add_proto_expert_info(e.bitmap1_beyond)
  end
  if not ack then
    if bitmap0 == 0 or bitmap1 == 0 then subtree:add_proto_expert_info(e.empty_bitmap) end
    if not edge and popcount(bitmap1) ~= 1 then b1:add_proto_expert_info(e.ambiguous_rack) end
  end
  if not control then
    if resend then subtree:add_proto_expert_info(e.resend) end
    if collision then subtree:add_proto_expert_info(e.collision) end
  end
  if ecn then subtree:add_proto_expert_info(e.ecn) end

  local base_port = atp.prefs.base_port
  local dst = udp_dstport()
  local src = udp_srcport()
  if dst ~= nil then
    local udp_queue = dst.value - base_port
    local item = subtree:add(f.udp_queue, udp_queue)
    item:set_generated()
    if udp_queue ~= queue or (src ~= nil and src.value ~= dst.value) then
      item:add_proto_expert_info(e.bad_port)
    end
  end

  local count = math.min(kValues, math.floor((length - kHeaderBytes) / 4))
  if control and count >= 4 then
    -- Word 0: magic (16 bits), version, type; word 1: sender; words 2-3:
    -- incarnation, high word first; the rest is the type's body.
    local magic = tvb(kHeaderBytes, 2):uint()
    local body = subtree:add(f.values, tvb(kHeaderBytes, count * 4))
    body:set_text("Control message")
    if magic ~= kControlMagic then body:add_proto_expert_info(e.bad_control) end
    body:add(f.control_version, tvb(kHeaderBytes + 2, 1))
    body:add(f.control_type, tvb(kHeaderBytes + 3, 1))
    body:add(f.control_sender, tvb(kHeaderBytes + 4, 4))
    body:add(f.control_incarnation, tvb(kHeaderBytes + 8, 8))
    count = 0
  end
  if count > 0 then
    local values = subtree:add(f.values, tvb(kHeaderBytes, count * 4))
    values:set_text(string.format("Values: %d x %s", count, fp and "float32" or "int32"))
    for i = 0, count - 1 do
      local r = tvb(kHeaderBytes + i * 4, 4)
      if fp then values:add(f.value_float, r) else values:add(f.value_int, r) end
    end
  end

  pinfo.cols.info = string.format("job %d q%d pos %d %s bitmap0 0x%08x bitmap1 0x%08x agg %d%s",
                                  job, queue, position, kind, bitmap0, bitmap1, aggregator,
                                  ecn and " ECN" or "")
  return length
end

local registered_base = nil
local function register_ports()
  local udp = DissectorTable.get("udp.port")
  if registered_base ~= nil then
    for p = registered_base, registered_base + 15 do udp:remove(p, atp) end
  end
  registered_base = atp.prefs.base_port
  for p = registered_base, registered_base + 15 do udp:add(p, atp) end
end

function atp.prefs_changed() register_ports() end
register_ports()
