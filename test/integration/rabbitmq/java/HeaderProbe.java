import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.GetResponse;
import com.rabbitmq.client.LongString;
import com.rabbitmq.client.impl.LongStringHelper;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A publisher and reader with the official RabbitMQ Java client, for twophase's header-fidelity
 * test. Usage:
 *   HeaderProbe publish URI QUEUE MESSAGE_ID   publish one message with every header type
 *   HeaderProbe peek URI QUEUE TIMEOUT_MS      print one message's headers, leave it queued
 *   HeaderProbe take URI QUEUE TIMEOUT_MS      print one message's headers and ack it
 *   HeaderProbe message URI QUEUE TIMEOUT_MS   print one message's id, body (hex) and headers, and ack it
 * Headers are printed as one JSON object per line: name -> {"t": Java type, "v": value}, where
 * byte arrays and long strings are hex, tables and arrays nest.
 */
public final class HeaderProbe {
  public static void main(String[] args) throws Exception {
    ConnectionFactory factory = new ConnectionFactory();
    factory.setUri(args[1]);
    try (Connection connection = factory.newConnection("twophase-java-header-probe");
         Channel channel = connection.createChannel()) {
      switch (args[0]) {
        case "publish" -> publish(channel, args[2], args[3]);
        case "peek" -> read(channel, args[2], Long.parseLong(args[3]), false);
        case "take" -> read(channel, args[2], Long.parseLong(args[3]), true);
        case "message" -> readMessage(channel, args[2], Long.parseLong(args[3]));
        default -> throw new IllegalArgumentException("unknown mode " + args[0]);
      }
    }
  }

  /** Every field type the Java client writes, at the values issue #12 item 8 names. */
  static Map<String, Object> sampleHeaders(String key) {
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("idempotency-key", key);
    h.put("float", 1.0f);
    h.put("float-fraction", 1.5f);
    h.put("double", 0.1d);
    h.put("long-max", Long.MAX_VALUE);
    h.put("long-2p53-plus-1", 9007199254740993L);
    h.put("long-small", 5L);
    h.put("int", 100000);
    h.put("int-small", 7);
    h.put("short", (short) 1000);
    h.put("byte", (byte) 5);
    h.put("bytes", new byte[] {(byte) 0xff, 0x00, 0x41});
    h.put("string", "h\u00e9llo");
    h.put("long-string-not-utf8", LongStringHelper.asLongString(new byte[] {(byte) 0xff, (byte) 0xfe, 0x41}));
    h.put("timestamp", new Date(1_700_000_000_000L));
    h.put("decimal", new BigDecimal("123.45"));
    h.put("bool", true);
    h.put("void", null);
    Map<String, Object> inner = new LinkedHashMap<>();
    inner.put("float", 2.5f);
    List<Object> list = new ArrayList<>(Arrays.asList((short) 1000, "x", true, new byte[] {1, 2}, inner, Long.MAX_VALUE));
    Map<String, Object> nested = new LinkedHashMap<>();
    nested.put("int", 100000);
    nested.put("long", 9007199254740993L);
    nested.put("list", list);
    h.put("nested", nested);
    return h;
  }

  static void publish(Channel channel, String queue, String messageId) throws Exception {
    channel.confirmSelect();
    AMQP.BasicProperties properties = new AMQP.BasicProperties.Builder()
        .messageId(messageId)
        .deliveryMode(2)
        .headers(sampleHeaders(messageId))
        .build();
    channel.basicPublish("", queue, true, properties, "{\"from\":\"java\"}".getBytes(StandardCharsets.UTF_8));
    channel.waitForConfirmsOrDie(10_000);
  }

  static void read(Channel channel, String queue, long timeoutMs, boolean ack) throws Exception {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (System.currentTimeMillis() < deadline) {
      GetResponse response = channel.basicGet(queue, false);
      if (response == null) {
        Thread.sleep(50);
        continue;
      }
      Map<String, Object> headers = response.getProps().getHeaders();
      System.out.println(fields(headers == null ? Map.of() : headers));
      long tag = response.getEnvelope().getDeliveryTag();
      if (ack) channel.basicAck(tag, false);
      else channel.basicReject(tag, true);
      return;
    }
    System.err.println("no message in " + queue + " within " + timeoutMs + " ms");
    System.exit(3);
  }

  /** Takes one message and prints {"messageId": …, "bodyHex": …, "headers": {…}}. */
  static void readMessage(Channel channel, String queue, long timeoutMs) throws Exception {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (System.currentTimeMillis() < deadline) {
      GetResponse response = channel.basicGet(queue, false);
      if (response == null) {
        Thread.sleep(50);
        continue;
      }
      Map<String, Object> headers = response.getProps().getHeaders();
      String id = response.getProps().getMessageId();
      System.out.println("{\"messageId\":" + (id == null ? "null" : quote(id)) + ",\"bodyHex\":" + quote(hex(response.getBody()))
          + ",\"headers\":" + fields(headers == null ? Map.of() : headers) + "}");
      channel.basicAck(response.getEnvelope().getDeliveryTag(), false);
      return;
    }
    System.err.println("no message in " + queue + " within " + timeoutMs + " ms");
    System.exit(3);
  }

  /** A table as a JSON object: name -> described value. */
  static String fields(Map<?, ?> map) {
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<?, ?> e : map.entrySet()) {
      if (out.length() > 1) out.append(',');
      out.append(quote(String.valueOf(e.getKey()))).append(':').append(describe(e.getValue()));
    }
    return out.append('}').toString();
  }

  static String describe(Object value) {
    if (value == null) return "{\"t\":\"null\"}";
    if (value instanceof Map<?, ?> map) return "{\"t\":\"Table\",\"v\":" + fields(map) + "}";
    if (value instanceof List<?> list) {
      StringBuilder out = new StringBuilder("[");
      for (Object item : list) {
        if (out.length() > 1) out.append(',');
        out.append(describe(item));
      }
      return "{\"t\":\"Array\",\"v\":" + out.append(']') + "}";
    }
    if (value instanceof LongString s) return typed("LongString", hex(s.getBytes()));
    if (value instanceof byte[] b) return typed("bytes", hex(b));
    if (value instanceof Date d) return typed("Date", String.valueOf(d.getTime()));
    if (value instanceof BigDecimal d) return typed("BigDecimal", d.toPlainString());
    return typed(value.getClass().getSimpleName(), String.valueOf(value));
  }

  static String typed(String type, String value) {
    return "{\"t\":" + quote(type) + ",\"v\":" + quote(value) + "}";
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder();
    for (byte b : bytes) out.append(String.format("%02x", b & 0xff));
    return out.toString();
  }

  static String quote(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20 || c > 0x7e) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }
}
